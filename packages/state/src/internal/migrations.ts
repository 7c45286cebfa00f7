/**
 * Code-defined migrations, run by Kysely's Migrator at open. Names sort in order; a released
 * migration is never edited (add a new one). Every statement is `if not exists` so a migration
 * interrupted on SQLite (which Kysely runs without a transaction) can simply run again; the
 * caller additionally serialises migrators across processes (see db.ts).
 */
import type { Kysely } from 'kysely';
import type { Migration, MigrationProvider } from 'kysely/migration';

type Backend = 'sqlite' | 'postgres';

function initial(backend: Backend): Migration {
  const blob = backend === 'postgres' ? 'bytea' : 'blob';
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>) {
      const s = db.schema;
      await s
        .createTable('jobs')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('config_rev', 'integer', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('changed_at', 'text', (c) => c.notNull())
        .addColumn('last_changed_fields', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('job_tombstones')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('deleted_rev', 'integer', (c) => c.notNull())
        .addColumn('deleted_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('job_revisions')
        .ifNotExists()
        .addColumn('job_id', 'text', (c) => c.notNull())
        .addColumn('rev', 'integer', (c) => c.notNull())
        .addColumn('changed_fields', 'text', (c) => c.notNull())
        .addColumn('changed_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('job_revisions_pk', ['job_id', 'rev'])
        .execute();
      await s
        .createTable('runs')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('job_id', 'text', (c) => c.notNull())
        .addColumn('seq', 'bigint', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('cause_digest', 'text')
        .addColumn('warnings', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('prev_run_id', 'text')
        .addColumn('trigger', 'text', (c) => c.notNull())
        .addColumn('started_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addColumn('finished_at', 'text')
        .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('records', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('destinations', 'text', (c) => c.notNull())
        .addColumn('pruned_at', 'text')
        .addColumn('detail', 'text', (c) => c.notNull())
        .execute();
      await s.createIndex('runs_job_seq').ifNotExists().on('runs').columns(['job_id', 'seq']).execute();
      await s.createIndex('runs_status').ifNotExists().on('runs').column('status').execute();
      await s
        .createTable('run_rings')
        .ifNotExists()
        .addColumn('job_id', 'text', (c) => c.primaryKey())
        .addColumn('recorded_total', 'bigint', (c) => c.notNull())
        .addColumn('rolled_over', 'bigint', (c) => c.notNull())
        .execute();
      await s
        .createTable('counters')
        .ifNotExists()
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('value', 'bigint', (c) => c.notNull())
        .execute();
      await s
        .createTable('checkpoints')
        .ifNotExists()
        .addColumn('run_id', 'text', (c) => c.primaryKey())
        .addColumn('job_id', 'text', (c) => c.notNull())
        .addColumn('sealed', blob, (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('leases')
        .ifNotExists()
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('fence', 'bigint', (c) => c.notNull())
        .execute();
      for (const kv of ['settings', 'update_state']) {
        await s
          .createTable(kv)
          .ifNotExists()
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
      }
      await s
        .createTable('role_assignments')
        .ifNotExists()
        .addColumn('subject', 'text', (c) => c.primaryKey())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('email', 'text')
        .addColumn('granted_by', 'text')
        .addColumn('granted_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('custom_roles')
        .ifNotExists()
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('base', 'text', (c) => c.notNull())
        .addColumn('capabilities', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('sessions')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('email', 'text')
        .addColumn('method', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .execute();
      await s.createIndex('sessions_subject').ifNotExists().on('sessions').column('subject').execute();
      await s
        .createTable('approvals')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('subject_hash', 'text')
        .addColumn('requested_by', 'text')
        .addColumn('requested_by_email', 'text')
        .addColumn('requested_at', 'text', (c) => c.notNull())
        .addColumn('decided_by', 'text')
        .addColumn('decided_by_email', 'text')
        .addColumn('decided_at', 'text')
        .addColumn('expires_at', 'text')
        .addColumn('detail', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await s.createIndex('approvals_hash').ifNotExists().on('approvals').column('subject_hash').execute();
      await s
        .createTable('audit_events')
        .ifNotExists()
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .addColumn('ts', 'text', (c) => c.notNull())
        .addColumn('prev_hash', 'text', (c) => c.notNull())
        .addColumn('hash', 'text', (c) => c.notNull())
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('actor_subject', 'text')
        .addColumn('actor_email', 'text')
        .addColumn('event', 'text', (c) => c.notNull())
        .execute();
      await s
        .createIndex('audit_action')
        .ifNotExists()
        .on('audit_events')
        .columns(['action', 'seq'])
        .execute();
      await s
        .createTable('pull_credentials')
        .ifNotExists()
        .addColumn('scope', 'text', (c) => c.primaryKey())
        .addColumn('client_id', 'text', (c) => c.notNull())
        .addColumn('verifier', 'text', (c) => c.notNull())
        .addColumn('granted_by', 'text')
        .addColumn('granted_at', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .addColumn('pulls', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('notification_channels')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull())
        .addColumn('config', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('notification_rules')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('rule', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await s
        .createTable('notification_deliveries')
        .ifNotExists()
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .addColumn('at', 'text', (c) => c.notNull())
        .addColumn('event', 'text', (c) => c.notNull())
        .addColumn('severity', 'text', (c) => c.notNull())
        .addColumn('channel_kind', 'text', (c) => c.notNull())
        .addColumn('channel_id', 'text')
        .addColumn('detail', 'text', (c) => c.notNull())
        .addColumn('accepted', 'integer', (c) => c.notNull())
        .addColumn('test', 'integer', (c) => c.notNull())
        .execute();
    },
  };
}

/** Shared rate-limit counters (the mutating-route limit across replicas). */
function rateLimitWindows(): Migration {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('rate_limits')
        .ifNotExists()
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('window_start', 'bigint', (c) => c.notNull())
        .addColumn('count', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}

/** People: passkeys, recovery code verifiers, single-use tokens and ceremony challenges (docs/identity.md). */
function identity(): Migration {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>) {
      const s = db.schema;
      await s
        .createTable('passkeys')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('public_key', 'text', (c) => c.notNull())
        .addColumn('counter', 'bigint', (c) => c.notNull())
        .addColumn('transports', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('used_at', 'text')
        .execute();
      await s.createIndex('passkeys_subject').ifNotExists().on('passkeys').column('subject').execute();
      await s.createIndex('passkeys_email').ifNotExists().on('passkeys').column('email').execute();
      await s
        .createTable('recovery_codes')
        .ifNotExists()
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('staged', 'integer', (c) => c.notNull())
        .addColumn('selector', 'text', (c) => c.notNull())
        .addColumn('hash', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('recovery_codes_pk', ['subject', 'staged', 'selector'])
        .execute();
      await s
        .createTable('one_time_tokens')
        .ifNotExists()
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('purpose', 'text', (c) => c.notNull())
        .addColumn('bound_to', 'text', (c) => c.notNull())
        .addColumn('verifier', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
    },
  };
}

/** The provider handed to Kysely's Migrator. */
export function migrationProvider(backend: Backend): MigrationProvider {
  return {
    async getMigrations() {
      return {
        '0001_initial': initial(backend),
        '0002_rate_limit_windows': rateLimitWindows(),
        '0003_identity': identity(),
      };
    },
  };
}
