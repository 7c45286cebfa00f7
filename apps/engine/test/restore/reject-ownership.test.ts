/**
 * `POST /admin/restore/reject` through HTTP with real perimeter-JWT callers: a caller holding only
 * `restore.request` may withdraw their own pending request but not someone else's (403 in the
 * specification's forbidden shape, a refused `restore-reject` audit event, the request still
 * pending); a caller with `restore.approve` rejects anyone's.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer } from '../helpers/engine.ts';
import {
  AUDIENCE,
  callerHeaders,
  grantRoles,
  ISSUER,
  startKeySet,
  TEAM_DOMAIN,
} from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { restoreWorld } from './helpers.ts';

const pki = makePki(tempDir(t, 'coffer-reject-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const w = await restoreWorld(
  t,
  { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
  { testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert } },
);
const state = w.e.app.state;
await grantRoles(state, [
  ['alice', 'restore-operator'],
  ['mallory', 'operator'],
  ['bob', 'approver'],
]);
const as = callerHeaders(keySet);
const src = join(tempDir(t, 'coffer-reject-src-'), 'tree');
mkdirSync(src, { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
const runId = await w.backUp('docs', { type: 'files', path: src });
const policy = await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 0 }, bearer());
if (policy.status !== 200) throw new Error(`policy: ${policy.text}`);

async function requested(who: Record<string, string>, out: string): Promise<string> {
  const body = { runId, target: { namespaceId: join(w.roots, out) } };
  const plan = (await w.post('/restore', body, who)).json();
  const r = await w.post('/restore/request', body, who);
  if (r.status !== 200) throw new Error(`request: ${r.text}`);
  return plan.planHash as string;
}

const statusOf = async (planHash: string) =>
  (await w.get('/restore/approvals', bearer()))
    .json()
    .approvals.find((a: { subjectHash: string }) => a.subjectHash === planHash)?.status;

t.test("a requester cannot reject another person's request", async (t) => {
  const planHash = await requested(await as('alice'), 'a1');
  const before = await state.audit.query({ action: 'restore-reject' });
  const r = await w.post('/restore/reject', { planHash, reason: 'mine now' }, await as('mallory'));
  t.equal(r.status, 403, r.text);
  t.same(r.json(), { error: 'forbidden', required: 'restore.approve', have: 'operator' });
  t.equal(await statusOf(planHash), 'pending', 'the request is still pending');
  const after = await state.audit.query({ action: 'restore-reject' });
  t.equal(after.length - before.length, 1, 'the refusal is audited');
  const refused = after.find((e) => !before.some((b) => b.seq === e.seq));
  t.equal(refused?.actorSubject, `${ISSUER}#mallory`);
  t.match(refused?.event, {
    outcome: 'refused',
    detail: { reason: 'not-requester', required: 'restore.approve', planHash },
  });

  const own = await w.post('/restore/reject', { planHash }, await as('alice'));
  t.equal(own.status, 200, `the requester withdraws: ${own.text}`);
  t.equal(own.json().approval.status, 'rejected');
});

t.test("an approver rejects anyone's request", async (t) => {
  const planHash = await requested(await as('mallory'), 'a2');
  const r = await w.post('/restore/reject', { planHash }, await as('bob'));
  t.equal(r.status, 200, r.text);
  t.equal(await statusOf(planHash), 'rejected');
  const events = await state.audit.query({ action: 'restore-reject' });
  t.ok(
    events.some((e) => e.event.outcome === 'applied' && e.actorSubject === `${ISSUER}#bob`),
    'the rejection is audited as applied',
  );
});
