/**
 * The posture reads of drills and destinations over HTTP, for any signed-in caller:
 * GET /admin/drill-all (latest drill per job, `due` from the restore-test cadence, counts),
 * GET /admin/drill-evidence (`?job=`, `?verdict=`, `?limit=` with count, total and truncated; `?id=`
 * one record or 404; a malformed limit 400), and GET /admin/destination (the jobs writing to each
 * destination, how many are enabled, and the latest canary flight, null before the first).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { restoreWorld } from '../restore/helpers.ts';
import { session } from './helpers.ts';

const w = await restoreWorld(t, { CONSOLE_ORIGIN: 'https://console.coffer.test' });
const src = join(tempDir(t, 'coffer-posture-drill-'), 'tree');
mkdirSync(src, { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'b.txt'), 'bravo\n');
const files = { type: 'files', path: src };
// `docs`: drilled; `idle`: a cadence and an ok run but never drilled (due); `paused`: disabled.
const runId = await w.backUp('docs', files);
await w.backUp('idle', files);
async function upsert(id: string, extra: Record<string, unknown>) {
  const r = await w.post('/jobs', { id, cadenceSeconds: 3600, source: files, ...extra });
  if (r.status !== 200) throw new Error(`job upsert: ${r.text}`);
}
await upsert('idle', { restoreTestCadenceSeconds: 3600 });
await upsert('paused', { enabled: false });
const first = await w.drill('docs');
const second = await w.drill('docs');

t.test('drill-all: the latest drill per job, what is due, counts', async (t) => {
  const viewer = await session(w.e, 'viewer');
  const r = await w.get('/drill-all', viewer);
  t.equal(r.status, 200, r.text);
  const body = r.json();
  const byJob = Object.fromEntries(body.jobs.map((j: { job: string }) => [j.job, j]));
  t.match(byJob.docs.lastDrill, { id: second.id, runId, verdict: 'pass' });
  t.equal(byJob.idle.lastDrill, null);
  t.equal(byJob.paused.lastDrill, null);
  t.same(body.due, ['idle'], 'a cadence, an ok run, never drilled');
  t.same(body.counts, { jobs: 3, drilled: 1, neverDrilled: 2, passing: 1, failing: 0, due: 1 });
  t.equal(body.running, null);
});

t.test('drill-evidence: filters, limit, one record', async (t) => {
  const all = (await w.get('/drill-evidence?job=docs')).json();
  t.match(all, { count: 2, total: 2, truncated: false });
  t.same(
    all.evidence.map((e: { id: string }) => e.id),
    [second.id, first.id],
    'newest first',
  );
  const one = (await w.get('/drill-evidence?job=docs&limit=1')).json();
  t.match(one, { count: 1, total: 2, truncated: true });
  t.equal(one.evidence[0].id, second.id);
  t.match((await w.get('/drill-evidence?limit=0')).json(), { count: 1 }, 'clamped up to 1');
  t.match((await w.get('/drill-evidence?verdict=fail')).json(), { count: 0, total: 0, evidence: [] });
  t.match((await w.get('/drill-evidence?verdict=pass')).json(), { total: 2 });
  t.equal((await w.get('/drill-evidence?limit=ten')).status, 400);
  t.equal((await w.get('/drill-evidence?verdict=maybe')).status, 400);
  const rec = await w.get(`/drill-evidence?id=${first.id}`);
  t.equal(rec.status, 200);
  t.match(rec.json(), { kind: 'coffer-drill-evidence', id: first.id, job: 'docs' });
  const missing = await w.get('/drill-evidence?id=nope');
  t.equal(missing.status, 404);
  t.same(missing.json(), { error: 'drill evidence not found' });
});

t.test('destination: writers, enabled writers, the latest canary flight', async (t) => {
  const before = (await w.get('/destination')).json().destinations;
  t.equal(before.length, 1);
  t.match(before[0], {
    id: 'default',
    default: true,
    kind: 'fs',
    description: /^fs:/,
    jobs: ['docs', 'idle', 'paused'],
    enabledJobs: 2,
    canary: null,
  });
  const flight = await w.e.app.canary.fly('schedule');
  t.equal(flight.verdict, 'alive');
  const after = (await w.get('/destination')).json().destinations[0];
  t.match(after.canary, { verdict: 'alive', at: /^\d{4}-/, code: null });
});
