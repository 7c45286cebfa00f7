/**
 * Fenced apply lease (issue 13 item 6, restore applies): while an apply runs, its lease is taken
 * over by another holder (as after this engine was paused past the lease's expiry and another
 * replica took the apply over and recorded it). The engine that lost the lease must record nothing
 * more about the apply: not its row, not an approval settlement, not a `restore-apply` audit event.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { restoreWorld } from './helpers.ts';

const FILES = 1500;

function countFiles(dir: string): number {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((d) => d.isFile()).length;
  } catch {
    return 0;
  }
}

t.test('an apply whose lease was taken over records nothing more', async (t) => {
  const w = await restoreWorld(t);
  const state = w.e.app.state;
  // Outside the engine's data dir: a source there is refused (it would archive the engine's keys).
  const src = join(tempDir(t, 'coffer-apply-lease-src-'), 'src');
  for (let d = 0; d < 15; d++) mkdirSync(join(src, `d${d}`), { recursive: true });
  for (let i = 0; i < FILES; i++)
    writeFileSync(join(src, `d${i % 15}`, `f${i}.txt`), `file ${i}\n`.repeat(64));
  const runId = await w.backUp('many', { type: 'files', path: src });

  const out = join(w.roots, 'out');
  const r = await w.post('/restore', { runId, target: { namespaceId: out }, confirm: true });
  t.equal(r.status, 202, r.text);
  const applyId = r.json().applyId as string;
  const name = `restore-apply:${applyId}`;
  const mine = await state.leases.get(name);
  t.ok(mine, 'the engine holds the apply lease');

  // Another holder takes the lease over (the lease ran out while this engine stood still) and
  // records the apply as it sees it.
  t.ok(await state.leases.release(name, mine!.holder));
  const theirs = await state.leases.acquire(name, 'replica-b:restore', 60_000);
  t.ok(theirs && theirs.fence > mine!.fence, 'the new holder has a higher fence');
  const key = `restore.apply.${applyId}`;
  const row = await state.settings.get<Record<string, unknown>>(key);
  const recorded = { ...row, status: 'interrupted', holder: 'replica-b:restore', marker: 'replica-b' };
  await state.settings.set(key, recorded);

  // The stale apply either notices the loss (logged; its next progress flush checks the lease) or,
  // without fencing, runs to its end and records its outcome (an audit event).
  const settled = async () =>
    w.e.logs.join('').includes('restore-apply-lease-lost') ||
    (await state.audit.query({ action: 'restore-apply' })).length > 0;
  for (let i = 0; i < 2400 && !(await settled()); i++) await new Promise((res) => setTimeout(res, 25));
  t.ok(countFiles(out) < FILES, 'the stale apply stopped at its next progress flush');
  await new Promise((res) => setTimeout(res, 300));

  t.same(await state.settings.get(key), recorded, 'the new holder’s record of the apply stands');
  t.same(
    await state.audit.query({ action: 'restore-apply' }),
    [],
    'no restore-apply audit event from the stale holder',
  );
  t.match(w.e.logs.join(''), /restore-apply-lease-lost/, 'the loss is logged');
  t.equal((await state.leases.get(name))?.holder, 'replica-b:restore', 'the new holder keeps the lease');
});
