/**
 * Restores and drills hand their memory back too (src/runs/idle-memory.ts, wired in
 * plugins/restores.ts and plugins/drills.ts): once an apply, a dry run, a verify or a drill has
 * ended and nothing else runs, the engine's collection runs; not while an apply or a drill is in
 * flight.
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
  const r = await w.post('/restore', { runId, confirm: true, target: { namespaceId: join(w.roots, 'a') } });
  t.equal(r.status, 202, 'apply accepted');
  t.ok(app.restores.applies.active > 0, 'the apply is in flight once accepted');
  // Something else settles while the apply runs: its release is due after 20 ms and must wait.
  app.runs.idleMemory.settled();
  await tick(60);
  t.ok(app.restores.applies.active > 0, 'the apply is still in flight past the release delay');
  t.equal(collected, 0, 'no collection while the apply is in flight');
  while (app.restores.applies.active > 0) await tick(5);
  const view = (await w.get(`/restore/applies?id=${r.json().applyId}`)).json();
  t.equal(view.status, 'succeeded');
  // Only the apply's own end can release now (the earlier request found it busy and lapsed).
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

t.test('a drill: released once it ended, not while it ran', async (t) => {
  await tick(100);
  collected = 0;
  const app = w.e.app;
  const r = await w.post('/drill/run', { job: 'idle' });
  t.equal(r.status, 202, 'drill started');
  t.ok(app.drills.active !== null, 'the drill is in flight once started');
  app.runs.idleMemory.settled();
  await tick(60);
  t.ok(app.drills.active !== null, 'the drill is still in flight past the release delay');
  t.equal(collected, 0, 'no collection while the drill is in flight');
  while (app.drills.active !== null) await tick(5);
  for (let i = 0; i < 100 && collected === 0; i++) await tick(10);
  t.equal(collected, 1, 'one collection after it ended');
});
