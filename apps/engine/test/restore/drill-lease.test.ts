/**
 * Fenced drill lease (issue 14, the one leased-task primitive): a drill whose `drill.session`
 * lease is taken over before its commit point (as after this engine stood still past the lease's
 * expiry and another replica started its own drill) records no evidence and no `restore-drill`
 * audit event, and leaves the new holder's session record and lease alone.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { DRILL_LEASE, type DrillSession } from '../../src/drills/scheduler.ts';
import { activePins } from '../../src/runs/pins.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';

const root = tempDir(t, 'coffer-drill-lease-');
writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
const src = join(root, 'source');
mkdirSync(src, { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');

let takeOver: ((session: DrillSession) => Promise<void>) | null = null;
const e = await startEngine(
  t,
  { ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub') },
  {
    drills: { beforeRecord: async (s) => takeOver?.(s) },
    rateLimit: { max: 1000, windowSeconds: 60 },
  },
);
const api = (path: string, body?: unknown) =>
  http(`${e.url}/admin${path}`, { headers: bearer(), ...(body === undefined ? {} : { body }) });
const state = e.app.state;

const job = await api('/jobs', { id: 'docs', cadenceSeconds: 86_400, source: { type: 'files', path: src } });
if (job.status !== 200) throw new Error(`job upsert: ${job.text}`);

t.test('a drill that keeps its lease records its evidence (the control)', async (t) => {
  await e.app.runs.trigger('docs');
  await e.app.runs.idle();
  const r = await api('/drill/run', { job: 'docs' });
  t.equal(r.status, 202, r.text);
  for (let i = 0; i < 400 && e.app.drills.active; i++) await new Promise((res) => setTimeout(res, 25));
  const evidence = (await api('/drill-evidence?job=docs')).json().evidence as unknown[];
  t.equal(evidence.length, 1, 'evidence recorded');
  t.equal((await state.audit.query({ action: 'restore-drill' })).length, 1, 'audited');
  t.equal(await state.leases.get(DRILL_LEASE).then((l) => (l && l.expiresAt > Date.now() ? l : null)), null);
});

t.test('a drill whose lease was taken over records nothing', async (t) => {
  const replica = {
    sessionId: 'drs_replica',
    job: 'docs',
    runId: 'r',
    trigger: 'manual',
    holder: 'replica-b:drills',
  };
  let fenceMine = 0;
  takeOver = async () => {
    const mine = await state.leases.get(DRILL_LEASE);
    fenceMine = mine!.fence;
    await state.leases.release(DRILL_LEASE, mine!.holder);
    const theirs = await state.leases.acquire(DRILL_LEASE, 'replica-b:drills', 60_000);
    if (!theirs) throw new Error('the replica could not take the lease');
    await state.settings.set('drill.session', { ...replica, startedAt: new Date().toISOString() });
  };
  const before = (await api('/drill-evidence?job=docs')).json().evidence.length as number;
  const r = await api('/drill/run', { job: 'docs' });
  t.equal(r.status, 202, r.text);
  for (let i = 0; i < 400 && e.app.drills.active; i++) await new Promise((res) => setTimeout(res, 25));
  t.equal(e.app.drills.active, null, 'the stale drill ended');
  t.equal((await api('/drill-evidence?job=docs')).json().evidence.length, before, 'no evidence recorded');
  t.equal((await state.audit.query({ action: 'restore-drill' })).length, 1, 'no second restore-drill event');
  const lease = await state.leases.get(DRILL_LEASE);
  t.equal(lease?.holder, 'replica-b:drills', 'the new holder keeps the lease');
  t.ok(lease!.fence > fenceMine, 'with a higher fence');
  t.match(
    await state.settings.get('drill.session'),
    { sessionId: 'drs_replica' },
    "the new holder's session record stands",
  );
  t.match(e.logs.join(''), /drill-lease-lost|ERR_STATE_LEASE_LOST/, 'the loss is logged');
  takeOver = null;
});

t.test('a drill whose session record cannot be stored leaves no drill, lease or pin behind', async (t) => {
  // The state store fails the one write that records the session (as a locked or lost database
  // would): the drill must not stay current, or every later drill answers busy and the engine
  // never releases its idle memory.
  const settings = state.settings;
  // The replica of the test before gives its lease back.
  const held = await state.leases.get(DRILL_LEASE);
  if (held) await state.leases.release(DRILL_LEASE, held.holder);
  await settings.delete('drill.session');
  const set = settings.set.bind(settings);
  let failed = 0;
  settings.set = (async (key: string, value: unknown) => {
    if (key === 'drill.session' && failed === 0) {
      failed++;
      throw Object.assign(new Error('database is locked'), { code: 'ERR_STATE_UNAVAILABLE' });
    }
    return set(key, value);
  }) as typeof settings.set;
  t.teardown(() => {
    settings.set = set;
  });
  const r = await api('/drill/run', { job: 'docs' });
  t.equal(failed, 1, 'the session write failed');
  t.ok(r.status >= 500, `the drill was refused (${r.status})`);
  t.equal(e.app.drills.active, null, 'no drill is current');
  t.equal(
    await state.leases.get(DRILL_LEASE).then((l) => (l && l.expiresAt > Date.now() ? l : null)),
    null,
    'the lease is free',
  );
  const pins = (await activePins(settings, new Date())).filter((p) => p.purpose === 'drill');
  t.same(pins, [], 'no drill pin is left');
  const again = await api('/drill/run', { job: 'docs' });
  t.equal(again.status, 202, `the next drill starts: ${again.text}`);
  for (let i = 0; i < 400 && e.app.drills.active; i++) await new Promise((res) => setTimeout(res, 25));
  t.equal(e.app.drills.active, null, 'and ends');
});
