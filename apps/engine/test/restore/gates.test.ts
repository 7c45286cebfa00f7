/**
 * The apply gates and the remaining 4xx replies of the restore routes, through HTTP against a
 * started engine with a small per-caller rate limit:
 * - gate (1) comes before the rate limiter and before anything is read: a caller without
 *   `restore.apply` whose budget is spent still gets 403 (never 429), for a run that does not exist
 *   too, and each refusal leaves a `restore-apply-denied` audit event;
 * - an apply whose recomputed plan differs from the reviewed `planHash` is 409, an apply of a plan
 *   that cannot be read back is 409, a dry run of it is 200 `ok: false` (never an error status);
 * - 400 for an unknown field, an unsupported connector field, a malformed plan hash, a non-string
 *   runId, a non-object target; 404 for an unknown apply (poll and cancel); 409 for resuming an
 *   apply that is not interrupted; 403 for request, resume and drills without their capability; 404 for a
 *   drill of an unknown job; `record-not-found` for a recordName that matches nothing;
 * - a files target confined to the restore roots: a target that is a symbolic link out of the roots
 *   is 400, a symbolic link already inside the target is never written through.
 */
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { restoreWorld } from './helpers.ts';

const LIMIT = 8;
const pki = makePki(tempDir(t, 'coffer-gates-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const w = await restoreWorld(
  t,
  { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
  {
    testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert },
    rateLimit: { max: LIMIT, windowSeconds: 600 },
  },
);
const state = w.e.app.state;
// Each test spends its own caller's budget of LIMIT mutations.
await grantRoles(
  state,
  ['alice', 'frank', 'gina'].map((sub) => [sub, 'restore-operator'] as const),
);
const as = callerHeaders(keySet);
const src = join(tempDir(t, 'coffer-gates-src-'), 'tree');
mkdirSync(join(src, 'docs'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'docs', 'b.txt'), 'bravo\n');
const runId = await w.backUp('docs', { type: 'files', path: src });
const target = { namespaceId: join(w.roots, 'out') };

t.test('capability before the rate limiter and before any read', async (t) => {
  const carol = await as('carol');
  const statuses: number[] = [];
  for (let i = 0; i <= LIMIT; i++) statuses.push((await w.post('/restore', { runId, target }, carol)).status);
  t.same(statuses, [...Array(LIMIT).fill(200), 429], 'dry runs count against the budget');
  const before = (await state.audit.query({ action: 'restore-apply-denied' })).length;
  for (const body of [
    { runId, target, confirm: true },
    { runId: 'no-such-run', confirm: true },
    { confirm: true, include: [''] },
  ]) {
    const r = await w.post('/restore', body, carol);
    t.equal(r.status, 403, `refused, not rate limited nor validated: ${JSON.stringify(body)}`);
    t.same(r.json(), { error: 'forbidden', required: 'restore.apply', have: 'viewer' });
  }
  const denied = await state.audit.query({ action: 'restore-apply-denied' });
  t.equal(denied.length - before, 3, 'a denied-apply audit event each');
  t.equal((await w.post('/restore', { runId, target }, carol)).status, 429, 'a dry run is still limited');
  t.same(await state.settings.get(`restore.plan.none`), undefined);
});

t.test('409: the plan changed since review; the plan cannot be read back', async (t) => {
  const alice = await as('alice');
  const reviewed = (await w.post('/restore', { runId, target, include: ['docs/'] }, alice)).json();
  const changed = await w.post(
    '/restore',
    { runId, target, confirm: true, planHash: reviewed.planHash },
    alice,
  );
  t.equal(changed.status, 409, changed.text);
  t.equal(changed.json().error, 'the restore plan changed since it was reviewed: run the dry run again');
  t.not(changed.json().planHash, reviewed.planHash, 'the recomputed hash is returned');
  const gone = await w.post('/restore', { runId: 'no-such-run', target, confirm: true }, alice);
  t.equal(gone.status, 409);
  t.same(gone.json(), { error: 'restore cannot be applied: run not found' });
  const dry = await w.post('/restore', { runId: 'no-such-run', target }, alice);
  t.equal(dry.status, 200, 'a dry run that cannot read back is not an error status');
  t.match(dry.json(), { ok: false, reason: 'run not found', planHash: null });
  const missing = await w.post('/restore', { runId, recordName: 'nope.txt', target }, alice);
  t.match(missing.json(), { ok: true, result: 'record-not-found', plannedWrites: 0, skippedCount: 2 });
});

t.test('400s of the request body', async (t) => {
  const dave = await as('dave');
  const cases: Array<[unknown, string]> = [
    [{ runId, colour: 'red' }, 'unknown field "colour"'],
    [
      { runId, cfConfig: { token: 'SECRET-TOKEN-MARKER' } },
      'cfConfig is not supported: this engine has no platform-configuration connector',
    ],
    [{ runId, planHash: 'sha384:00' }, 'planHash must be sha384:<96 lower-case hex digits>'],
    [{ runId: 42 }, 'runId must be a string'],
    [{ runId, target: 'here' }, 'target must be an object'],
    [{ runId, target: { path: '/x' } }, 'target may only hold binding, namespaceId and bucketName'],
    [[runId], 'request body must be a JSON object'],
  ];
  for (const [body, error] of cases) {
    const r = await w.post('/restore', body, dave);
    t.equal(r.status, 400, error);
    t.same(r.json(), { error });
    t.notMatch(r.text, 'SECRET-TOKEN-MARKER', 'a token is never echoed');
  }
});

t.test(
  'applies: 404 unknown, 409 resume of a finished apply; capabilities of request, resume, drills',
  async (t) => {
    const alice = await as('frank');
    const carol = await as('carol');
    const unknown = `rap_${'0'.repeat(24)}`;
    t.equal((await w.get(`/restore/applies?id=${unknown}`, alice)).status, 404);
    t.equal((await w.get('/restore/applies?id=nonsense', alice)).status, 404);
    t.equal((await w.post('/restore/cancel', { applyId: unknown }, alice)).status, 404);
    t.equal((await w.post('/restore/cancel', { applyId: 'x' }, alice)).status, 400);
    const r = await w.post('/restore', { runId, target, confirm: true }, alice);
    t.equal(r.status, 202, r.text);
    const applyId = r.json().applyId;
    let view = (await w.get(`/restore/applies?id=${applyId}`, alice)).json();
    for (let i = 0; i < 400 && view.status === 'running'; i++) {
      await new Promise((res) => setTimeout(res, 25));
      view = (await w.get(`/restore/applies?id=${applyId}`, alice)).json();
    }
    t.equal(view.status, 'succeeded');
    const resume = await w.post('/restore/resume', { applyId }, alice);
    t.equal(resume.status, 409);
    t.same(resume.json(), {
      error: 'only an interrupted apply can be resumed (this one is succeeded)',
      applyId,
    });
    t.equal(
      (await w.post('/restore/resume', { applyId }, await as('erin'))).status,
      403,
      'resume needs restore.apply',
    );
    t.equal(
      (await w.post('/restore/request', { runId }, await as('erin'))).status,
      403,
      'request needs restore.request',
    );
    t.equal(
      (await w.post('/drill/run', { job: 'docs' }, await as('erin'))).status,
      403,
      'drills need drill.run',
    );
    const noJob = await w.post('/drill/run', { job: 'no-such-job' }, alice);
    t.equal(noJob.status, 404, noJob.text);
    // carol spent her budget above: the capability gate of reject still answers first.
    const reject = await w.post('/restore/reject', { planHash: `sha384:${'0'.repeat(96)}` }, carol);
    t.equal(reject.status, 403, 'reject: capability before the rate limiter');
    t.same(reject.json(), { error: 'forbidden', required: 'restore.approve', have: 'viewer' });
  },
);

t.test('symbolic links: out of the roots refused, never written through inside the target', async (t) => {
  const gina = await as('gina');
  const outside = tempDir(t, 'coffer-gates-outside-');
  const linked = join(w.roots, 'linked');
  symlinkSync(outside, linked);
  const out = await w.post('/restore', { runId, target: { namespaceId: linked }, confirm: true }, gina);
  t.equal(out.status, 400, out.text);
  t.match(out.json().error, /outside the configured restore roots/);
  const dry = await w.post('/restore', { runId, target: { namespaceId: linked } }, gina);
  t.equal(dry.status, 200, 'the dry run answers the plan');
  t.match(dry.json().advisories, [{ code: 'ERR_RESTORE_OUTSIDE_ROOTS', message: /outside the configured/ }]);

  const dir = join(w.roots, 'with-link');
  mkdirSync(dir);
  symlinkSync(outside, join(dir, 'docs'));
  const body = { runId, target: { namespaceId: dir } };
  const plan = (await w.post('/restore', body, gina)).json();
  t.match(plan, { ok: true, plannedWrites: 1 });
  t.same(plan.skipped, [
    {
      name: 'docs/b.txt',
      reason: 'a parent in the target is a symbolic link or not a directory (would write outside the target)',
    },
  ]);
  const r = await w.post('/restore', { ...body, confirm: true, planHash: plan.planHash }, gina);
  t.equal(r.status, 202, r.text);
  let view = (await w.get(`/restore/applies?id=${r.json().applyId}`, gina)).json();
  for (let i = 0; i < 400 && view.status === 'running'; i++) {
    await new Promise((res) => setTimeout(res, 25));
    view = (await w.get(`/restore/applies?id=${r.json().applyId}`, gina)).json();
  }
  t.equal(view.status, 'succeeded', JSON.stringify(view));
  t.equal(view.receipt.written, 1);
  t.ok(existsSync(join(dir, 'a.txt')));
  t.same(readdirSync(outside), [], 'nothing written through the link');
});
