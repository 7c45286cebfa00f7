/**
 * Restores, dry runs, verifies, attestations and drills of a run recorded `ok` with
 * `unchangedFrom` (a `skipUnchanged` job whose source did not change), end to end through HTTP
 * against a started engine: the run has no archive of its own, so each resolves to the run whose
 * archive holds the data and says so (`archiveRunId`), and the bytes restored are the source's.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns } from '@coffer/archive';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { restoreWorld } from './helpers.ts';

const w = await restoreWorld(t);
const state = w.e.app.state;
const src = join(tempDir(t, 'coffer-unchanged-src-'), 'tree');
mkdirSync(join(src, 'docs'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'docs', 'b.txt'), 'bravo\n');
const upsert = await w.post('/jobs', {
  id: 'docs',
  cadenceSeconds: 3600,
  skipUnchanged: true,
  source: { type: 'files', path: src },
});
if (upsert.status !== 200) throw new Error(`job upsert: ${upsert.text}`);

async function runNow(): Promise<string> {
  const trig = await w.post('/trigger', { id: 'docs' });
  if (trig.status !== 200) throw new Error(`trigger: ${trig.text}`);
  await w.e.app.runs.idle();
  return trig.json().runId as string;
}
const sealed = await runNow();
const unchanged = await runNow();
const again = await runNow();

t.test('the set-up: two unchanged runs, one archive', async (t) => {
  t.equal((await state.runs.get(unchanged))?.status, 'ok');
  t.equal((await state.runs.get(unchanged))?.detail.unchangedFrom, sealed);
  t.equal((await state.runs.get(again))?.detail.unchangedFrom, sealed);
  t.same(
    (await listRuns(w.e.app.destinations.get('default')!, 'docs')).map((r) => r.runId),
    [sealed],
  );
});

t.test('dry run, verify and attestation of an unchanged run read the archive that holds it', async (t) => {
  const dry = await w.dryRun({ runId: unchanged, target: { namespaceId: join(w.roots, 'dry') } });
  t.equal(dry.status, 200, dry.text);
  t.match(dry.json(), {
    ok: true,
    runId: unchanged,
    archiveRunId: sealed,
    recordsVerified: 2,
    plannedWrites: 2,
    isLatest: false,
  });
  const latest = (await w.dryRun({ runId: again, target: { namespaceId: join(w.roots, 'dry') } })).json();
  t.match(latest, { ok: true, runId: again, archiveRunId: sealed, isLatest: true });
  t.equal(latest.planHash, dry.json().planHash, 'the same archive and target: the same plan');

  const verify = await w.post('/restore/verify', { runId: unchanged });
  t.match(verify.json(), { ok: true, recordsVerified: 2, records: 2 });

  const attest = await w.post('/restore/attest', { runId: again });
  t.equal(attest.status, 200, attest.text);
  t.match(attest.json(), { ok: true, signature: { ok: true }, completeness: { ok: true } });
});

t.test('an apply of an unchanged run restores the source bytes', async (t) => {
  const out = join(w.roots, 'restored');
  const done = await w.apply({ runId: again, target: { namespaceId: out } });
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.runId, again, 'the apply is of the requested run');
  t.equal(done.receipt.runId, sealed, 'the receipt names the archive it read');
  t.equal(readFileSync(join(out, 'a.txt'), 'utf8'), 'alpha\n');
  t.equal(readFileSync(join(out, 'docs', 'b.txt'), 'utf8'), 'bravo\n');
});

t.test("a drill of the job's latest run (unchanged) drills the archive that holds it", async (t) => {
  const ev = await w.drill('docs');
  t.match(ev, { verdict: 'pass', runId: again, archiveRunId: sealed, records: 2, matched: 2 });
  const byId = await w.post('/drill/run', { job: 'docs', runId: unchanged });
  t.equal(byId.status, 202, byId.text);
  await byId.json();
  for (let i = 0; i < 400 && (await w.get('/attest/session/status')).json().active; i++)
    await new Promise((res) => setTimeout(res, 25));
  const evidence = (await w.get('/drill-evidence?job=docs')).json().evidence;
  t.match(
    evidence.find((e: { runId: string }) => e.runId === unchanged),
    { verdict: 'pass', archiveRunId: sealed },
  );
  const audit = await state.audit.query({ action: 'restore-drill' });
  t.ok(
    audit.some((a) => (a.event.detail as { archiveRunId?: string }).archiveRunId === sealed),
    'the audit event names the archive drilled',
  );
});
