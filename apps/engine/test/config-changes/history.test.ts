/**
 * Configuration history through HTTP: every applied version (direct upsert and delete, an approved
 * change, a policy change) is a signed, hash-chained record; `GET /admin/config/history` pages them
 * newest first with the chain head and a chain check; `GET /admin/config/version` returns one with
 * its configuration and signature check. A record edited in the store (plain, re-hashed, re-signed
 * by another key) or removed is reported as a break in a 200 body, never hidden.
 */
import { canonicalJsonBytes, generateSigner, sha384Digest, sign, toBase64Url } from '@coffer/crypto';
import t from 'tap';
import {
  GENESIS_HASH,
  SIGN_CONTEXT,
  type StoredVersion,
  versionKey,
} from '../../src/config-changes/index.ts';
import { ISSUER } from '../helpers/perimeter.ts';
import { job, peopleWorld } from './helpers.ts';

const p = await peopleWorld(t);
const { w } = p;
const state = w.e.app.state;
const sub = (name: string) => `${ISSUER}#${name}`;

await p.grant([
  ['alice', 'operator'],
  ['bob', 'operator'],
  ['olga', 'owner'],
  ['vera', 'viewer'],
]);

t.test('applied versions form a signed chain', async (t) => {
  t.equal((await w.post('/jobs', job('docs'))).status, 200);
  t.equal((await w.post('/jobs', job('docs', { cadenceSeconds: 7200 }), await p.as('alice'))).status, 200);
  t.equal((await w.post('/jobs', job('docs', { cadenceSeconds: 7200 }))).status, 200, 'a no-op rewrite');
  t.equal((await w.post('/jobs', job('tmp'))).status, 200);
  t.equal((await w.post('/jobs/delete', { id: 'tmp' })).status, 200);
  t.equal((await w.post('/config/approval-policy', { enabled: true }, await p.as('olga'))).status, 200);
  const held = await w.post(
    '/jobs',
    job('docs', { cadenceSeconds: 7200, name: 'Docs' }),
    await p.as('alice'),
  );
  t.equal(
    (await w.post(`/config/changes/${held.json().changeId}/approve`, {}, await p.as('bob'))).status,
    200,
  );

  const h = await w.get('/config/history', await p.as('vera'));
  t.equal(h.status, 200, 'a viewer reads it (posture.read)');
  const body = h.json();
  t.same(body.chain, { ok: true, checked: 6 });
  t.equal(body.head.id, 6);
  t.same(
    body.versions.map((v: { id: number; kind: string; target: string }) => [v.id, v.kind, v.target]),
    [
      [6, 'job-upsert', 'docs'],
      [5, 'config-approval-policy', 'config-approval'],
      [4, 'job-delete', 'tmp'],
      [3, 'job-upsert', 'tmp'],
      [2, 'job-upsert', 'docs'],
      [1, 'job-upsert', 'docs'],
    ],
    'newest first; the no-op rewrite made no version',
  );
  t.equal(body.head.hash, body.versions[0].hash);
  t.equal(body.versions[5].prevHash, GENESIS_HASH);
  t.equal(body.versions[4].prevHash, body.versions[5].hash, 'linked');
  t.match(body.versions[0], {
    actor: { subject: sub('alice') },
    approver: { subject: sub('bob') },
    changeId: held.json().changeId,
    configRev: 3,
    changedFields: ['name'],
    configHash: /^sha384:[0-9a-f]{96}$/,
    verified: true,
  });
  t.match(body.versions[4], {
    actor: { subject: sub('alice'), method: 'perimeter-access' },
    changedFields: ['cadenceSeconds'],
  });
  t.match(body.versions[5], { actor: { subject: null, method: 'admin-token' }, configRev: 1 });
  t.equal(body.versions[2].configRev, 1, 'a delete records its deletedRev');

  const page = (await w.get('/config/history?limit=2')).json();
  t.same(
    page.versions.map((v: { id: number }) => v.id),
    [6, 5],
  );
  t.equal(page.nextBefore, 5);
  const next = (await w.get(`/config/history?limit=2&before=${page.nextBefore}`)).json();
  t.same(
    next.versions.map((v: { id: number }) => v.id),
    [4, 3],
  );
  t.equal((await w.get('/config/history?limit=0')).status, 400);
  t.equal((await w.get('/config/history?before=x')).status, 400);
});

t.test('one version with its configuration and signature check', async (t) => {
  const v = await w.get('/config/version?id=2', await p.as('vera'));
  t.equal(v.status, 200, v.text);
  const body = v.json();
  t.match(body, {
    record: { id: 2, kind: 'job-upsert', target: 'docs', configRev: 2 },
    config: { id: 'docs', cadenceSeconds: 7200, source: { type: 'files', path: '/srv/data' } },
    verification: { ok: true, signature: true },
    signer: w.e.app.keys.signer.fingerprint,
  });
  t.equal(
    body.record.configHash,
    sha384Digest(canonicalJsonBytes(body.config)),
    'the config is the one hashed',
  );
  const del = (await w.get('/config/version?id=4')).json();
  t.equal(del.config, null, 'a delete keeps no configuration');
  t.equal((await w.get('/config/version?id=abc')).status, 400);
  t.equal((await w.get('/config/version?id=0')).status, 400);
  t.equal((await w.get('/config/version')).status, 400);
  t.equal((await w.get('/config/version?id=999')).status, 404);
});

t.test('a tampered or removed record is reported as a break', async (t) => {
  const key = versionKey(3);
  const original = (await state.settings.get<StoredVersion>(key))!;
  const chain = async () => {
    const r = await w.get('/config/history');
    t.equal(r.status, 200, 'a break is still a 200');
    return r.json().chain;
  };

  // An edited field.
  await state.settings.set(key, { ...original, record: { ...original.record, target: 'other' } });
  t.same(await chain(), { ok: false, checked: 2, brokenAt: 3, reason: 'hash-mismatch' });
  t.match((await w.get('/config/version?id=3')).json().verification, { ok: false, fault: 'hash-mismatch' });

  // Edited and re-hashed: the engine's signature no longer covers it.
  const { hash: _h, ...body } = { ...original.record, target: 'other' };
  const rehashed = { ...body, hash: sha384Digest(canonicalJsonBytes(body)) };
  await state.settings.set(key, { ...original, record: rehashed });
  t.same(await chain(), { ok: false, checked: 2, brokenAt: 3, reason: 'signature-invalid' });

  // Re-signed by another key.
  const other = generateSigner();
  await state.settings.set(key, {
    ...original,
    record: rehashed,
    signature: toBase64Url(sign(other.secretKey, canonicalJsonBytes(rehashed), SIGN_CONTEXT)),
  });
  t.same(await chain(), { ok: false, checked: 2, brokenAt: 3, reason: 'signature-invalid' });
  t.match((await w.get('/config/version?id=3')).json().verification, { ok: false, signature: false });

  // The configuration body swapped under an intact record.
  await state.settings.set(key, {
    ...original,
    config: { ...(original.config as object), cadenceSeconds: 60 },
  });
  t.same(await chain(), { ok: false, checked: 2, brokenAt: 3, reason: 'config-mismatch' });

  // Removed.
  await state.settings.delete(key);
  t.same(await chain(), { ok: false, checked: 2, brokenAt: 3, reason: 'missing' });
  t.equal((await w.get('/config/version?id=3')).status, 404);

  // The newest record removed: the head still names it.
  await state.settings.set(key, original);
  t.same(await chain(), { ok: true, checked: 6 });
  const newest = (await state.settings.get(versionKey(6)))!;
  await state.settings.delete(versionKey(6));
  t.same(await chain(), { ok: false, checked: 5, brokenAt: 6, reason: 'missing' });
  await state.settings.set(versionKey(6), newest);
  t.same(await chain(), { ok: true, checked: 6 }, 'restored, the chain checks again');
});
