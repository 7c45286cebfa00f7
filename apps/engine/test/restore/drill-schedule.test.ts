/**
 * Scheduled restore drills against a started engine with an injected clock: the job's
 * restore-test cadence drives a drill of the latest ok run once it is due (evidence on
 * GET /admin/drill-evidence, used by GET /admin/rto, a `restore-drill` audit event with the engine
 * as actor), not again within the cadence, again after it; and one drill at a time under the
 * `drill.session` lease, also across two engines on one state store.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { DRILL_LEASE } from '../../src/drills/scheduler.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';

const HOUR = 3_600_000;
const root = tempDir(t, 'coffer-drill-schedule-');
const bg = generateRecipient();
writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', bg.publicKey));
const src = join(root, 'source');
mkdirSync(join(src, 'sub'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'sub', 'b.txt'), 'bravo\n'.repeat(1000));

const clock = { now: new Date('2030-01-01T00:00:00.000Z') };
const now = () => new Date(clock.now.getTime());
const env = { ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub') };
const a = await startEngine(t, env, {
  drills: { now, intervalSeconds: 1 },
  rateLimit: { max: 1000, windowSeconds: 60 },
});
const api = (path: string, body?: unknown) =>
  http(`${a.url}/admin${path}`, { headers: bearer(), ...(body === undefined ? {} : { body }) });

const job = await api('/jobs', {
  id: 'docs',
  cadenceSeconds: 86_400,
  restoreTestCadenceSeconds: 3600,
  source: { type: 'files', path: src },
});
if (job.status !== 200) throw new Error(`job upsert: ${job.text}`);
// A second job with a cadence but no ok run yet: never drilled.
await api('/jobs', {
  id: 'empty',
  cadenceSeconds: 86_400,
  restoreTestCadenceSeconds: 3600,
  enabled: false,
  source: { type: 'files', path: src },
});

const scheduled = async () =>
  ((await api('/drill-evidence?job=docs')).json().evidence as Array<{ trigger: string }>).filter(
    (e) => e.trigger === 'schedule',
  );

t.test('no drill without an ok run; RTO unknown without drill history', async (t) => {
  t.same(await a.app.drills.check(), [], 'nothing to drill yet');
  const rto = (await api('/rto')).json();
  t.equal(rto.status, 'unknown', 'no history: unknown');
  t.match(rto.jobs, [
    { job: 'docs', status: 'unknown' },
    { job: 'empty', status: 'unknown' },
  ]);
});

t.test('the cadence drives a drill of the latest ok run, evidence, RTO and audit', async (t) => {
  const trig = await api('/trigger', { id: 'docs' });
  t.equal(trig.status, 200, trig.text);
  const runId = trig.json().runId as string;
  await a.app.runs.idle();

  // The running scheduler (checks every second) picks the job up.
  a.app.drills.startScheduler();
  let evidence: Array<Record<string, unknown>> = [];
  for (let i = 0; i < 400 && evidence.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    evidence = await scheduled();
  }
  t.equal(evidence.length, 1, 'one scheduled drill');
  t.match(evidence[0], {
    job: 'docs',
    runId,
    trigger: 'schedule',
    verdict: 'pass',
    records: 2,
    matched: 2,
    startedAt: clock.now.toISOString(),
  });
  const audit = await a.app.state.audit.query({ action: 'restore-drill' });
  t.equal(audit.length, 1, 'audited once');
  t.match(audit[0]?.event, {
    action: 'restore-drill',
    outcome: 'applied',
    target: 'docs',
    actor: { method: 'engine', subject: null },
    detail: { runId, trigger: 'schedule', verdict: 'pass', records: 2, mismatched: 0 },
  });
  const rto = (await api('/rto')).json();
  t.equal(rto.status, 'partial', 'one job estimated, one without history');
  const docs = (rto.jobs as Array<{ job: string; status: string; basis?: { drills: number } }>).find(
    (j) => j.job === 'docs',
  );
  t.equal(docs?.status, 'estimated', 'the scheduled drill feeds the estimate');
  t.equal(docs?.basis?.drills, 1);

  // Within the cadence: not due.
  clock.now = new Date(clock.now.getTime() + HOUR - 1000);
  t.same(await a.app.drills.check(), [], 'not due within the cadence');
  t.equal((await scheduled()).length, 1);
  clock.now = new Date(clock.now.getTime() + 2000);
  t.same(await a.app.drills.due(), ['docs'], 'due once the cadence has passed');
  t.same(await a.app.drills.check(), ['docs']);
  t.equal((await scheduled()).length, 2, 'drilled again after the cadence');
  a.app.drills.stopScheduler();
});

t.test('one drill at a time: the lease, also across two engines on one state store', async (t) => {
  const state = a.app.state;
  clock.now = new Date(clock.now.getTime() + 2 * HOUR);
  // Another process holds the drill lease: no scheduled drill here, a manual one is 409.
  t.ok(await state.leases.acquire(DRILL_LEASE, 'another-engine', 60_000));
  t.same(await a.app.drills.check(), [], 'the lease held elsewhere: no drill');
  const busy = await api('/drill/run', { job: 'docs' });
  t.equal(busy.status, 409);
  t.ok(await state.leases.release(DRILL_LEASE, 'another-engine'));

  // Two engines on one state store check at once: exactly one drill.
  const b = await startEngine(
    t,
    { ...env, ENGINE_DATA_DIR: tempDir(t, 'coffer-drill-b-') },
    {
      state,
      keys: a.app.keys,
      drills: { now },
    },
  );
  t.not(b.app.drills.holder, a.app.drills.holder, 'two holders');
  const before = (await scheduled()).length;
  const [ra, rb] = await Promise.all([a.app.drills.check(), b.app.drills.check()]);
  t.equal(ra.length + rb.length, 1, `one engine drilled (${JSON.stringify([ra, rb])})`);
  t.equal((await scheduled()).length, before + 1, 'one new evidence');
  const status = (await api('/attest/session/status')).json();
  t.equal(status.active, false, 'no session left behind');
  t.equal((await state.leases.get(DRILL_LEASE))?.holder ?? null, null, 'lease released');
});
