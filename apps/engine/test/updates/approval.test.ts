// The update-approval policy through HTTP on SQLite and PostgreSQL against a real https channel
// (docs/updates.md "Approval policy"): a migration release is queued as the owner action
// `update-apply` (202) instead of applied, the maker cannot approve it, a second owner's approval
// runs the live apply on the approved path (the release lands under <data dir>/releases/); a ramp
// of a migration release stays refused; a dry run reports `approvalRequired` and queues nothing.
// Policy `all` queues a non-migration release; an approval whose channel changed since it was
// queued is refused and consumed; POST /admin/update/policy needs an owner and step-up, and
// lowering `all` waits for a second owner; under `migrations` a non-migration release goes
// through at once.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { create as createTar } from 'tar';
import { bearer, http, type Reply } from '../helpers/engine.ts';
import {
  BACKENDS,
  CONSOLE,
  channelSite,
  type Release,
  release,
  type UpdateEngine,
  updateEngine,
} from './helpers.ts';

/** A release whose engine artefact is a real release tarball (engine/main.js), as promote needs. */
async function runnable(t: Test, rel: Release): Promise<Release> {
  const version = rel.doc.components.engine.version;
  const dir = tempDir(t);
  mkdirSync(join(dir, 'src', 'engine'), { recursive: true });
  writeFileSync(join(dir, 'src', 'engine', 'main.js'), `// engine ${version}\n`);
  const file = join(dir, `engine-${version}.tgz`);
  await createTar({ gzip: true, file, cwd: join(dir, 'src') }, ['engine']);
  const bytes = new Uint8Array(readFileSync(file));
  rel.files.set(`engine-${version}.tgz`, bytes);
  rel.doc.components.engine = {
    ...rel.doc.components.engine,
    sha384: `sha384:${createHash('sha384').update(bytes).digest('hex')}`,
    size: bytes.length,
  };
  return rel;
}

interface Person {
  subject: string;
  headers: Record<string, string>;
}

/** A person holding `role` with a session signed in `agoSeconds` ago (step-up needs under 300). */
async function person(e: UpdateEngine, role: string, agoSeconds = 0): Promise<Person> {
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.org`;
  const subject = passkeySubject(email);
  await e.app.state.roles.assign({ subject, email, role, grantedBy: 'test' });
  const s = await e.app.sessions.mint({
    subject,
    email,
    method: 'passkey',
    authAt: Math.floor(Date.now() / 1000) - agoSeconds,
  });
  return { subject, headers: { cookie: `${SESSION_COOKIE}=${s.token}`, origin: CONSOLE } };
}

const as = (
  e: UpdateEngine,
  who: Person | null,
  path: string,
  body: unknown = {},
  extra: Record<string, string> = {},
) => http(`${e.url}/admin${path}`, { headers: { ...(who ? who.headers : bearer()), ...extra }, body });
const setPolicy = (e: UpdateEngine, who: Person | null, body: unknown) =>
  http(`${e.url}/admin/update/policy`, { headers: who ? who.headers : bearer(), body });

async function ownerActions(
  e: UpdateEngine,
  who: Person,
): Promise<{ id: string; action: string; status: string }[]> {
  const r = await http(`${e.url}/admin/owner-actions`, { headers: who.headers });
  return r.json().actions;
}

async function auditRows(e: UpdateEngine, action: string) {
  const r = await e.get(`/audit?action=${action}&limit=100`);
  return r.json().events as {
    outcome: string;
    target: string | null;
    approver: { subject: string | null } | null;
    detail: Record<string, unknown>;
  }[];
}

const queuedOk = (t: Test, r: Reply) => {
  t.equal(r.status, 202, r.text);
  t.match(r.json(), {
    outcome: 'queued',
    step: 'approval',
    approvalRequired: true,
    ownerActionQueued: true,
    approval: { id: /^oa_/, action: 'update-apply', status: 'pending', expiresAt: /Z$/ },
  });
  return r.json().approval.id as string;
};

for (const backend of BACKENDS)
  t.test(`a migration release waits for a second owner (${backend})`, async (t) => {
    const site = await channelSite(t);
    site.publish(
      await runnable(
        t,
        release({
          sequence: 1,
          version: '1.4.0',
          console: null,
          recommended: { migration: true, schemaEpoch: 2 },
        }),
      ),
    );
    const databaseUrl = backend === 'postgres' ? await postgresUrl() : undefined;
    const dataDir = tempDir(t);
    const e = await updateEngine(t, site, { databaseUrl, dataDir });
    const ada = await person(e, 'owner');
    const dan = await person(e, 'owner');

    t.match((await e.get('/update/policy')).json(), { approval: 'migrations', setBy: null, pending: [] });

    // A dry run reports what would happen: an approved apply passes, and it needs a second owner.
    const dry = await as(e, ada, '/update/apply', {});
    t.equal(dry.status, 200, dry.text);
    t.match(dry.json(), { outcome: 'dry-run', approvalRequired: true, record: { migration: true } });
    t.same(await ownerActions(e, ada), [], 'a dry run queues nothing');

    // The gradual path never carries a migration: refused, dry or live, and nothing queued.
    const rampDry = await as(e, ada, '/update/ramp', { percentage: 50 });
    t.equal(rampDry.status, 409);
    t.match(rampDry.json(), { step: 'migration', code: 'ERR_UPDATE_MIGRATION_GUARD' });
    const rampLive = await as(
      e,
      ada,
      '/update/ramp',
      { percentage: 50, dryRun: false },
      { 'x-engine-deploy-token': await e.deployToken() },
    );
    t.equal(rampLive.status, 409, rampLive.text);
    t.match(rampLive.json(), { code: 'ERR_UPDATE_MIGRATION_GUARD' });
    t.same(await ownerActions(e, ada), []);

    // A live apply still needs the deploy token before anything is queued.
    const noToken = await as(e, ada, '/update/apply', { dryRun: false });
    t.equal(noToken.status, 403);
    t.match(noToken.json(), { deployTokenRequired: true });

    // With it: queued, not carried out.
    const token = await e.deployToken();
    const queued = await as(e, ada, '/update/apply', { dryRun: false }, { 'x-engine-deploy-token': token });
    const id = queuedOk(t, queued);
    t.match(queued.json().approval, {
      kind: 'apply',
      version: '1.4.0',
      to: { engine: '1.4.0' },
      channel: { sequence: 1 },
    });
    t.equal((await e.get('/update/status')).json().record, null, 'nothing persisted');
    t.notOk(existsSync(join(dataDir, 'releases', '1.4.0')), 'nothing uploaded');
    t.match((await e.get('/update/policy')).json().pending, [
      { id, version: '1.4.0', requestedBy: ada.subject },
    ]);
    t.match(await ownerActions(e, dan), [
      { id, action: 'update-apply', status: 'pending', params: { version: '1.4.0' } },
    ]);
    const approval = await e.app.state.approvals.get(id);
    t.notOk(JSON.stringify(approval).includes(token.slice(4)), 'the queued action holds no token');

    // Maker is not checker; the bearer has no subject to check with.
    const self = await as(e, ada, `/owner-actions/${id}/approve`);
    t.equal(self.status, 403, 'maker is not checker');
    t.equal((await as(e, null, `/owner-actions/${id}/approve`)).status, 403, 'not the bearer');
    // A stale session of the second owner needs step-up first.
    const staleDan = await person(e, 'owner', 600);
    t.equal((await as(e, staleDan, `/owner-actions/${id}/approve`)).status, 401, 'step-up');

    // The second owner approves: the apply runs live on the approved path.
    const ok = await as(e, dan, `/owner-actions/${id}/approve`);
    t.ok([200, 202].includes(ok.status), ok.text);
    t.match(ok.json(), {
      ok: true,
      id,
      status: 'carried out',
      action: 'update-apply',
      result: { record: { migration: true, to: { engine: '1.4.0' }, toSchemaEpoch: 2 } },
    });
    // This build promotes and restarts (202 `restarting`); one without promote stops at `uploaded`.
    t.match(ok.json().result.outcome, /^(restarting|uploaded|awaiting-canary|applied)$/);
    t.ok(existsSync(join(dataDir, 'releases', '1.4.0', 'engine', 'main.js')), 'the release is in place');
    t.match((await e.get('/update/status')).json().record, { migration: true, to: { engine: '1.4.0' } });
    t.equal((await as(e, dan, `/owner-actions/${id}/approve`)).status, 409, 'single use');
    t.same((await e.get('/update/policy')).json().pending, []);

    // Audit: the queue and the approval, the update rows carrying the approval id; no token.
    const applies = await auditRows(e, 'update-apply');
    t.match(
      applies.find((r) => r.outcome === 'queued'),
      { target: '1.4.0', detail: { dryRun: false, outcome: 'queued', approval: id } },
    );
    t.match(
      applies.find((r) => r.detail.approval === id && r.outcome === 'applied'),
      { target: '1.4.0', approver: { subject: dan.subject }, detail: { dryRun: false } },
    );
    t.match(await auditRows(e, 'owner-action-queued'), [{ target: id, detail: { action: 'update-apply' } }]);
    t.match(await auditRows(e, 'owner-action-approved'), [
      { target: id, outcome: 'applied', approver: { subject: dan.subject } },
    ]);
    const feed = (await e.get('/audit?limit=200')).text;
    t.notOk(feed.includes(token.slice(21)), 'the deploy token is in no audit row');
  });

for (const backend of BACKENDS)
  t.test(`policy all, a changed channel, lowering the policy (${backend})`, async (t) => {
    const site = await channelSite(t);
    site.publish(release({ sequence: 1, version: '1.4.0', console: null }));
    const databaseUrl = backend === 'postgres' ? await postgresUrl() : undefined;
    const dataDir = tempDir(t);
    const e = await updateEngine(t, site, { databaseUrl, dataDir });
    const ada = await person(e, 'owner');
    const dan = await person(e, 'owner');

    // POST policy: an owner with a recent proof of presence; the body is checked.
    const operator = await person(e, 'operator');
    t.match(await setPolicy(e, operator, { approval: 'all' }), { status: 403 });
    t.equal((await setPolicy(e, await person(e, 'owner', 600), { approval: 'all' })).status, 401, 'step-up');
    t.equal((await setPolicy(e, ada, { approval: 'some' })).status, 400);
    t.equal((await setPolicy(e, ada, { approval: 'all', extra: 1 })).status, 400);
    t.equal(
      (await http(`${e.url}/admin/update/policy`, { headers: operator.headers })).status,
      200,
      'job.read reads it',
    );
    const set = await setPolicy(e, ada, { approval: 'all' });
    t.equal(set.status, 200, set.text);
    t.same(set.json(), { ok: true, approval: 'all', previous: 'migrations' });
    t.match((await e.get('/update/policy')).json(), { approval: 'all', setBy: ada.subject });
    t.match(await auditRows(e, 'owner-action-gate'), [
      {
        target: 'update-approval',
        outcome: 'applied',
        detail: { updateApproval: 'all', previous: 'migrations' },
      },
    ]);

    // Under `all` a routine release needs a second owner too.
    const dry = await as(e, ada, '/update/apply', {});
    t.match(dry.json(), { outcome: 'dry-run', approvalRequired: true });
    t.same(await ownerActions(e, ada), []);
    const id = queuedOk(
      t,
      await as(
        e,
        ada,
        '/update/apply',
        { dryRun: false },
        { 'x-engine-deploy-token': await e.deployToken() },
      ),
    );

    // The channel moves on before the approval: refused, and the approval is used up.
    site.publish(release({ sequence: 2, version: '1.5.0', console: null }));
    const moved = await as(e, dan, `/owner-actions/${id}/approve`);
    t.equal(moved.status, 409, moved.text);
    t.match(moved.json(), {
      ok: false,
      status: 'consumed',
      channelChanged: true,
      queued: { version: '1.4.0', channel: { sequence: 1 } },
      current: { version: '1.5.0', sequence: 2 },
    });
    t.equal((await as(e, dan, `/owner-actions/${id}/approve`)).status, 409, 'consumed');
    t.equal((await e.get('/update/status')).json().record, null, 'nothing ran');
    t.match(
      (await auditRows(e, 'update-apply')).find((r) => r.detail.approval === id && r.outcome === 'refused'),
      { approver: { subject: dan.subject }, detail: { reason: 'channel-changed' } },
    );

    // Lowering `all` is itself an owner action.
    const lower = await setPolicy(e, ada, { approval: 'migrations' });
    t.equal(lower.status, 202, lower.text);
    t.match(lower.json(), { ownerActionQueued: true, id: /^oa_/, approval: 'all', requested: 'migrations' });
    t.equal((await e.get('/update/policy')).json().approval, 'all', 'not yet');
    t.equal(
      (await as(e, ada, `/owner-actions/${lower.json().id}/approve`)).status,
      403,
      'maker is not checker',
    );
    const lowered = await as(e, dan, `/owner-actions/${lower.json().id}/approve`);
    t.equal(lowered.status, 200, lowered.text);
    t.match(lowered.json(), { action: 'update-policy', result: { approval: 'migrations' } });
    t.match((await e.get('/update/policy')).json(), { approval: 'migrations', setBy: 'owner-action' });
    t.ok(
      (await auditRows(e, 'owner-action-gate')).some(
        (r) =>
          r.target === 'update-approval' &&
          r.detail.updateApproval === 'migrations' &&
          r.detail.previous === 'all',
      ),
      'the lowering is audited',
    );

    // Under `migrations` a routine release goes through at once: no queue, the release in place.
    site.publish(await runnable(t, release({ sequence: 3, version: '1.5.0', console: null })));
    const live = await as(
      e,
      ada,
      '/update/apply',
      { dryRun: false },
      { 'x-engine-deploy-token': await e.deployToken() },
    );
    t.ok([200, 202].includes(live.status), live.text);
    t.match(live.json(), { approvalRequired: false, record: { to: { engine: '1.5.0' } } });
    t.match(live.json().outcome, /^(restarting|uploaded|awaiting-canary|applied)$/);
    t.ok(existsSync(join(dataDir, 'releases', '1.5.0', 'engine', 'main.js')), 'the release is in place');
    t.same(
      (await ownerActions(e, ada)).filter((a) => a.status === 'pending'),
      [],
      'nothing waits for a second owner',
    );
  });
