/**
 * Restores hand their memory back too (src/runs/idle-memory.ts, wired in plugins/restores.ts):
 * once an apply, a dry run or a verify has ended and nothing else runs, the engine's collection
 * runs; not while an apply is still in flight.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { restoreWorld } from './helpers.ts';

let collected = 0;
const w = await restoreWorld(t, {}, { runs: { idleMemory: { delayMs: 20, gc: () => collected++ } } });
const src = join(tempDir(t, 'coffer-idle-restore-'), 'tree');
mkdirSync(src, { recursive: true });
// Incompressible megabytes: the apply verifies and writes them for well over the release delay.
for (let i = 0; i < 4; i++) writeFileSync(join(src, `blob-${i}.bin`), randomBytes(8 * 1024 * 1024));
const runId = await w.backUp('idle', { type: 'files', path: src });
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('an apply: released once it ended, not while it ran', async (t) => {
  await tick(100);
  collected = 0;
  const app = w.e.app;
  const seenWhileRunning: number[] = [];
  const r = await w.post('/restore', { runId, confirm: true, target: { namespaceId: join(w.roots, 'a') } });
  t.equal(r.status, 202, 'apply accepted');
  const startedAt = performance.now();
  while (app.restores.applies.active > 0) {
    seenWhileRunning.push(collected);
    // Something else settling meanwhile (a run of another job, a read) must not release either.
    app.runs.idleMemory.settled();
    await tick(5);
  }
  const inFlightMs = performance.now() - startedAt;
  t.ok(inFlightMs > 60, `the apply ran ${Math.round(inFlightMs)} ms, three release delays or more`);
  t.ok(
    seenWhileRunning.length > 3 && seenWhileRunning.every((n) => n === 0),
    'no collection while the apply was in flight',
  );
  const view = (await w.get(`/restore/applies?id=${r.json().applyId}`)).json();
  t.equal(view.status, 'succeeded');
  for (let i = 0; i < 100 && collected === 0; i++) await tick(10);
  t.equal(collected, 1, 'one collection after it ended');
});

t.test('a dry run: released once it answered', async (t) => {
  await tick(100);
  collected = 0;
  const r = await w.dryRun({ runId, target: { namespaceId: join(w.roots, 'b') } });
  t.equal(r.status, 200, 'the dry run answered');
  for (let i = 0; i < 100 && collected === 0; i++) await tick(10);
  t.equal(collected, 1, 'one collection after the read ended');
});
