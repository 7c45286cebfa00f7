/**
 * A dry run never answers 400 because of where an apply would write (issue 13 item 15), through
 * HTTP against an engine with no restore roots: the dry run and verify of a files run answer the
 * plan with an `ERR_RESTORE_OUTSIDE_ROOTS` advisory, never look at the refused target (no
 * existence check of a file that is there), and carry the plan hash an apply would recompute; the
 * apply itself is still refused with 400.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { restoreWorld } from './helpers.ts';

const w = await restoreWorld(t, { ENGINE_RESTORE_ROOTS: '' });
const src = join(tempDir(t, 'coffer-advisory-src-'), 'tree');
mkdirSync(join(src, 'docs'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'docs', 'b.txt'), 'bravo\n');
const runId = await w.backUp('docs', { type: 'files', path: src });

t.test('no restore roots: the dry run answers the plan with an advisory', async (t) => {
  const r = await w.dryRun({ runId });
  t.equal(r.status, 200, r.text);
  const plan = r.json();
  t.match(plan, {
    ok: true,
    plannedWrites: 2,
    recordsVerified: 2,
    target: { type: 'files', namespace: src },
    overwriteCheck: null,
    planHash: /^sha384:[0-9a-f]{96}$/,
  });
  t.same(plan.advisories, [
    {
      code: 'ERR_RESTORE_OUTSIDE_ROOTS',
      message: 'filesystem restore is disabled: no restore roots are configured (ENGINE_RESTORE_ROOTS)',
    },
  ]);
  t.notOk(
    plan.sample.some((row: Record<string, unknown>) => 'targetExists' in row),
    'the refused target (where both files exist) was not looked at',
  );
  const again = (await w.dryRun({ runId })).json();
  t.equal(again.planHash, plan.planHash, 'the plan hash is stable');

  const verify = await w.post('/restore/verify', { runId });
  t.equal(verify.status, 200, verify.text);
  t.match(verify.json(), { ok: true, recordsVerified: 2, planHash: plan.planHash });
  t.match(verify.json().advisories, [{ code: 'ERR_RESTORE_OUTSIDE_ROOTS' }]);

  const apply = await w.post('/restore', { runId, confirm: true });
  t.equal(apply.status, 400, 'the apply is what is refused');
  t.same(apply.json(), {
    error: 'filesystem restore is disabled: no restore roots are configured (ENGINE_RESTORE_ROOTS)',
  });
  const reviewed = await w.post('/restore', { runId, confirm: true, planHash: plan.planHash });
  t.equal(reviewed.status, 400, 'also with the reviewed hash');
  t.same(readdirSync(src).sort(), ['a.txt', 'docs'], 'nothing written');
});

t.test('an explicit target outside the roots: advisory, not 400', async (t) => {
  const elsewhere = tempDir(t, 'coffer-advisory-elsewhere-');
  const r = await w.dryRun({ runId, target: { namespaceId: elsewhere }, include: ['docs/'] });
  t.equal(r.status, 200, r.text);
  t.match(r.json(), { ok: true, plannedWrites: 1, target: { namespace: elsewhere } });
  t.match(r.json().advisories, [{ code: 'ERR_RESTORE_OUTSIDE_ROOTS' }]);
  t.same(readdirSync(elsewhere), [], 'nothing written, nothing created');
});
