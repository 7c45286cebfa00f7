/**
 * People's credentials: passkeys, recovery code verifiers and single-use tokens. The formats and
 * checks are @coffer/identity's; this stores what it returns, with the atomic steps the checks
 * rely on (a counter moved only from the value read, a token or a code removed in the write that
 * uses it, a staged code set promoted in one write).
 */
import type { IdentityRepository, OneTimeTokenRecord, PasskeyRecord, RecoveryCodeVerifier } from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';
import { checkId, parseStored, toStored } from './json.ts';
import type { OneTimeTokensTable, PasskeysTable } from './schema.ts';

function toPasskey(r: PasskeysTable): PasskeyRecord {
  return {
    id: r.id,
    subject: r.subject,
    email: r.email,
    publicKey: r.public_key,
    counter: num(r.counter),
    transports: parseStored<string[]>(r.transports, 'passkey transports'),
    createdAt: r.created_at,
    usedAt: r.used_at,
  };
}

function toToken(r: OneTimeTokensTable): OneTimeTokenRecord {
  return {
    id: r.id,
    purpose: r.purpose,
    boundTo: r.bound_to,
    verifier: r.verifier,
    expiresAt: num(r.expires_at),
  };
}

function checkCounter(n: unknown, what: string): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
    throw new StateError('ERR_STATE_INVALID', `${what} must be a non-negative integer`);
  return n;
}

export function identityRepository(db: Db): IdentityRepository {
  return {
    async addPasskey(p) {
      if (!Array.isArray(p.transports) || !p.transports.every((x) => typeof x === 'string'))
        throw new StateError('ERR_STATE_INVALID', 'passkey transports must be a list of strings');
      const row: PasskeysTable = {
        id: checkId(p.id, 'passkey id'),
        subject: checkId(p.subject, 'subject'),
        email: checkId(p.email, 'email'),
        public_key: checkId(p.publicKey, 'passkey public key'),
        counter: checkCounter(p.counter, 'passkey counter'),
        transports: toStored(p.transports, 'passkey transports'),
        created_at: db.nowIso(),
        used_at: null,
      };
      await db.write('storing a passkey', (trx) => trx.insertInto('passkeys').values(row).execute());
      return toPasskey(row);
    },

    async passkey(id) {
      const row = await db.read('reading a passkey', (k) =>
        k.selectFrom('passkeys').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? toPasskey(row) : null;
    },

    async passkeysOf(subject) {
      const rows = await db.read('listing passkeys', (k) =>
        k.selectFrom('passkeys').selectAll().where('subject', '=', subject).orderBy('created_at').execute(),
      );
      return rows.map(toPasskey);
    },

    async emailHasPasskey(email) {
      const row = await db.read('checking an email for passkeys', (k) =>
        k.selectFrom('passkeys').select('id').where('email', '=', email).executeTakeFirst(),
      );
      return row !== undefined;
    },

    async usePasskey(id, from, to) {
      checkCounter(from, 'counter');
      checkCounter(to, 'counter');
      const r = await db.write('recording a passkey sign-in', (trx) =>
        trx
          .updateTable('passkeys')
          .set({ counter: to, used_at: db.nowIso() })
          .where('id', '=', id)
          .where('counter', '=', from)
          .executeTakeFirst(),
      );
      return num(r.numUpdatedRows) > 0;
    },

    async removePasskey(id) {
      const r = await db.write('removing a passkey', (trx) =>
        trx.deleteFrom('passkeys').where('id', '=', id).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },

    async stageRecoveryCodes(subject, verifiers) {
      checkId(subject, 'subject');
      const rows = verifiers.map((v: RecoveryCodeVerifier) => ({
        subject,
        staged: 1,
        selector: checkId(v.selector, 'recovery code selector'),
        hash: checkId(v.hash, 'recovery code hash'),
        created_at: db.nowIso(),
      }));
      await db.write('staging recovery codes', async (trx) => {
        await trx
          .deleteFrom('recovery_codes')
          .where('subject', '=', subject)
          .where('staged', '=', 1)
          .execute();
        if (rows.length > 0) await trx.insertInto('recovery_codes').values(rows).execute();
      });
    },

    async promoteRecoveryCodes(subject) {
      return db.write('promoting recovery codes', async (trx) => {
        const staged = await trx
          .selectFrom('recovery_codes')
          .select('selector')
          .where('subject', '=', subject)
          .where('staged', '=', 1)
          .execute();
        if (staged.length === 0) return false;
        await trx
          .deleteFrom('recovery_codes')
          .where('subject', '=', subject)
          .where('staged', '=', 0)
          .execute();
        await trx
          .updateTable('recovery_codes')
          .set({ staged: 0 })
          .where('subject', '=', subject)
          .where('staged', '=', 1)
          .execute();
        return true;
      });
    },

    async recoveryCodes(subject) {
      const rows = await db.read('reading recovery codes', (k) =>
        k
          .selectFrom('recovery_codes')
          .select(['selector', 'hash'])
          .where('subject', '=', subject)
          .where('staged', '=', 0)
          .orderBy('selector')
          .execute(),
      );
      return rows.map((r) => ({ selector: r.selector, hash: r.hash }));
    },

    async useRecoveryCode(subject, selector) {
      const r = await db.write('using a recovery code', (trx) =>
        trx
          .deleteFrom('recovery_codes')
          .where('subject', '=', subject)
          .where('staged', '=', 0)
          .where('selector', '=', selector)
          .executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },

    async putToken(record, options = {}) {
      const row: OneTimeTokensTable = {
        id: checkId(record.id, 'token id'),
        purpose: checkId(record.purpose, 'token purpose'),
        bound_to: checkId(record.boundTo, 'token binding'),
        verifier: checkId(record.verifier, 'token verifier'),
        expires_at: checkCounter(record.expiresAt, 'token expiry'),
        created_at: db.nowIso(),
      };
      await db.write('storing a single-use token', async (trx) => {
        if (options.replace === true)
          await trx
            .deleteFrom('one_time_tokens')
            .where('purpose', '=', row.purpose)
            .where('bound_to', '=', row.bound_to)
            .execute();
        await trx.insertInto('one_time_tokens').values(row).execute();
      });
    },

    async getToken(id, expect = {}) {
      const row = await db.read('reading a single-use token', (k) =>
        k.selectFrom('one_time_tokens').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      if (!row) return null;
      if (expect.purpose !== undefined && row.purpose !== expect.purpose) return null;
      if (expect.boundTo !== undefined && row.bound_to !== expect.boundTo) return null;
      return toToken(row);
    },

    async takeToken(id, expect = {}) {
      return db.write('using a single-use token', async (trx) => {
        const row = await trx
          .selectFrom('one_time_tokens')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirst();
        if (!row) return null;
        if (expect.purpose !== undefined && row.purpose !== expect.purpose) return null;
        if (expect.boundTo !== undefined && row.bound_to !== expect.boundTo) return null;
        const r = await trx.deleteFrom('one_time_tokens').where('id', '=', id).executeTakeFirst();
        // Another writer took it between the read and the delete: it is theirs.
        return num(r.numDeletedRows) > 0 ? toToken(row) : null;
      });
    },

    async purgeTokens(now) {
      const r = await db.write('purging single-use tokens', (trx) =>
        trx.deleteFrom('one_time_tokens').where('expires_at', '<=', now).executeTakeFirst(),
      );
      return num(r.numDeletedRows);
    },
  };
}
