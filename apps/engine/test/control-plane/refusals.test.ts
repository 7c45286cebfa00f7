/**
 * What control-plane recovery refuses (docs/control-plane.md "Refusals"): tampered exports (one
 * byte, either half of the hybrid signature, a non-canonical text, another signer, a plaintext
 * secret planted under a valid signature, a tampered sealed header), an export that would carry a
 * plaintext secret, a sealed export without a break-glass key, restore and apply-staged by anything
 * but the bare admin token (a token session included), and the per-caller rate limit after the
 * bearer check (restore) and after the capability gate (import).
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  decodeKeyFile,
  encodeKeyFile,
  fromBase64Url,
  generateSigner,
  sign,
  toBase64Url,
} from '@coffer/crypto';
import { CSRF_COOKIE, SESSION_COOKIE } from '@coffer/identity';
import t from 'tap';
import { ADMIN_TOKEN } from '../helpers/engine.ts';
import { CONSOLE, engineIn, keepKeys, makeWorld, resign } from './helpers.ts';

t.test('tampered exports are refused; status of a new engine; the export refuses plaintext', async (t) => {
  const world = makeWorld(t);
  const a = await engineIn(t, world);
  const fresh = (await a.get('/control-plane/status')).json();
  t.match(fresh, { recoveryNeeded: false, reasons: [], empty: true, breakGlassKey: true, staged: null });
  t.equal(
    (
      await a.post('/jobs', {
        id: 'docs',
        cadenceSeconds: 3600,
        source: { type: 'files', path: world.source },
      })
    ).status,
    200,
  );
  const signed = (await a.get('/control-plane/export-download')).json();
  const sealed = (await a.get('/control-plane/export-download?sealed=1')).json();
  const keys = keepKeys(a, world.root);

  const b = await engineIn(t, world, keys);
  const restore = (body: unknown) => b.post('/control-plane/restore', body);
  const refused = async (what: string, body: unknown, pattern: RegExp) => {
    const r = await restore(body);
    t.equal(r.status, 400, `${what}: refused`);
    t.match(r.json().error, pattern, what);
    return r;
  };

  // One byte of the export text changed.
  const flipped = signed.export.replace('"cadenceSeconds":3600', '"cadenceSeconds":3601');
  t.not(flipped, signed.export);
  await refused('one byte changed', { ...signed, export: flipped }, /signature does not verify/);
  // Either half of the hybrid signature broken (docs/crypto.md: 0x01 || Ed25519 (64) || ML-DSA-87).
  for (const [half, at] of [
    ['Ed25519', 10],
    ['ML-DSA-87', 2000],
  ] as const) {
    const sig = fromBase64Url(signed.signature);
    sig[at] = sig[at]! ^ 0x01;
    await refused(
      `${half} half broken`,
      { ...signed, signature: toBase64Url(sig) },
      /signature does not verify/,
    );
  }
  // Another signer, over the very same document.
  const other = generateSigner();
  const otherFile = join(world.root, 'other-signer.key');
  writeFileSync(otherFile, encodeKeyFile('signer-secret', other.secretKey), { mode: 0o600 });
  await refused('another signer', resign(JSON.parse(signed.export), otherFile), /signature does not verify/);
  // A valid signature over a text that is not the canonical form.
  const spaced = JSON.stringify(JSON.parse(signed.export), null, 1);
  const secret = decodeKeyFile(readFileSync(keys.ENGINE_SIGNER_KEY_FILE!, 'utf8'), 'signer-secret').key;
  await refused(
    'non-canonical text',
    {
      export: spaced,
      signature: toBase64Url(
        sign(secret, new TextEncoder().encode(spaced), 'coffer/control-plane-export/v1'),
      ),
    },
    /canonical/,
  );
  // Plaintext secrets planted under a VALID signature of this engine's own signer.
  // biome-ignore lint/suspicious/noExplicitAny: tests edit the parsed document freely
  type Doc = Record<string, any>;
  const plant = (mutate: (doc: Doc) => void) => {
    const doc = JSON.parse(signed.export);
    mutate(doc);
    return resign(doc, keys.ENGINE_SIGNER_KEY_FILE!);
  };
  const cases: Array<[string, (d: Doc) => void, string]> = [
    [
      'a channel secret in the clear',
      (d) =>
        d.slices.configuration.notify.channels.push({
          id: 'ch_x',
          name: 'x',
          kind: 'webhook',
          enabled: true,
          url: 'cnb1.AAAAAAAAAAAAAAAAAAAAAAAA',
          signingSecret: 'whsec-planted-plaintext',
        }),
      '$.slices.configuration.notify.channels[0].signingSecret',
    ],
    [
      'a pull-credential secret',
      (d) => {
        d.slices.configuration.jobs[0].config.name = 'dps_abcdefghijklmnop';
      },
      '$.slices.configuration.jobs[0].config.name',
    ],
    [
      'the admin token',
      (d) => {
        d.slices.authority.members.push({ subject: `x:${ADMIN_TOKEN}`, role: 'viewer' });
      },
      '$.slices.authority.members[0].subject',
    ],
    [
      'an armoured secret key',
      (d) => {
        d.slices.configuration.policies['restore.approval.enabled'] = encodeKeyFile(
          'signer-secret',
          other.secretKey,
        );
      },
      '$.slices.configuration.policies["restore.approval.enabled"]',
    ],
  ];
  for (const [what, mutate, path] of cases) {
    const r = await refused(what, plant(mutate), /plaintext secret refused/);
    t.equal(r.json().path, path, `${what}: the path is named`);
    t.notMatch(r.text, /whsec-planted|dps_abc|BEGIN COFFER/, `${what}: the value is not echoed`);
    t.notOk(r.text.includes(ADMIN_TOKEN), `${what}: the token is not echoed`);
  }
  t.match(
    (await b.get('/control-plane/status')).json(),
    { empty: true, staged: null },
    'nothing was applied',
  );
  const refusedRows = await b.app.state.audit.query({ action: 'control-plane-restore' });
  t.ok(
    refusedRows.length >= 8 && refusedRows.every((r) => r.event.outcome === 'refused'),
    'refusals audited',
  );
  t.notOk(JSON.stringify(refusedRows).includes('whsec-planted'), 'no secret in the audit rows');

  // A tampered sealed header: its signature no longer verifies.
  const badHeader = { ...sealed, header: { ...sealed.header, bodyHash: `sha384:${'0'.repeat(96)}` } };
  const rs = await b.post('/control-plane/restore-sealed', { sealed: badHeader, plaintext: signed });
  t.equal(rs.status, 400);
  t.match(rs.json().error, /sealed header signature/);

  // The export itself refuses to carry a plaintext secret put into the store behind the API's back.
  await a.app.state.notifications.putChannel({
    id: 'ch_bad',
    name: 'bad',
    kind: 'webhook',
    enabled: true,
    config: { url: 'https://hooks.example.org/x', apiKey: 'plain-api-key-value' },
  });
  const exp = await a.get('/control-plane/export-download');
  t.equal(exp.status, 409);
  t.match(exp.json(), { path: '$.slices.configuration.notify.channels[0].url' });
  t.notMatch(exp.text, /plain-api-key-value|hooks\.example/);
  const rows = await a.app.state.audit.query({ action: 'control-plane-export' });
  t.equal(rows[0]?.event.outcome, 'refused');
});

t.test('bare admin token only, rate limits after the gate, no break-glass key', async (t) => {
  const world = makeWorld(t);
  const e = await engineIn(
    t,
    world,
    { ENGINE_BREAK_GLASS_PUBLIC_KEY: '' },
    { rateLimit: { max: 2, windowSeconds: 60 } },
  );
  t.match((await e.get('/control-plane/status')).json(), { breakGlassKey: false });
  const noKey = await e.get('/control-plane/export-download?sealed=1');
  t.equal(noKey.status, 409, 'nothing to seal to');

  // A token session (made from the admin token) is a session, not the bare token.
  const m = await e.app.sessions.mint({ subject: null, email: null, method: 'token' });
  const tokenSession = {
    cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`,
    origin: CONSOLE,
    'x-engine-csrf': m.csrfToken,
  };
  for (const path of ['restore', 'restore-sealed', 'apply-staged']) {
    const r = await e.post(`/control-plane/${path}`, {}, tokenSession);
    t.equal(r.status, 403, `${path}: a token session is refused`);
    t.match(r.json(), { required: 'bare admin token' });
  }
  const owner = await e.person('ada@example.org');
  await e.app.state.roles.assign({
    subject: 'passkey:ada@example.org',
    role: 'owner',
    email: 'ada@example.org',
    grantedBy: 'test',
  });
  t.equal((await e.post('/control-plane/restore', {}, owner)).status, 403, 'an owner is a person');

  // The limit counts bare-token requests after the bearer check: two answered, the third 429.
  const junk = { export: '{}', signature: 'AA' };
  t.equal((await e.post('/control-plane/restore', junk)).status, 400);
  t.equal((await e.post('/control-plane/restore', junk)).status, 400);
  const limited = await e.post('/control-plane/restore', junk);
  t.equal(limited.status, 429, 'rate limited');
  t.ok(Number(limited.headers.get('retry-after')) >= 1);
  t.equal((await e.post('/control-plane/restore', junk, owner)).status, 403, 'the bearer check comes first');

  // Import: the capability gate first (an operator is refused, not counted), then the limit.
  await e.app.state.roles.assign({
    subject: 'passkey:op@example.org',
    role: 'operator',
    email: 'op@example.org',
    grantedBy: 'test',
  });
  const op = await e.person('op@example.org');
  const key = encodeKeyFile('signer-public', e.app.keys.signer.publicKey);
  for (let i = 0; i < 3; i++)
    t.equal((await e.post('/control-plane/import', { ...junk, signerPublicKey: key }, op)).status, 403);
  t.equal((await e.post('/control-plane/import', { ...junk, signerPublicKey: key }, owner)).status, 400);
  t.equal((await e.post('/control-plane/import', { ...junk, signerPublicKey: key }, owner)).status, 400);
  t.equal((await e.post('/control-plane/import', { ...junk, signerPublicKey: key }, owner)).status, 429);
});

t.test(
  "under configuration dual control an import of this engine's own export arrives disabled",
  async (t) => {
    const world = makeWorld(t);
    const a = await engineIn(t, world);
    for (const id of ['docs', 'photos'])
      t.equal(
        (await a.post('/jobs', { id, cadenceSeconds: 3600, source: { type: 'files', path: world.source } }))
          .status,
        200,
      );
    const signed = (await a.get('/control-plane/export-download')).json();
    const signerPublicKey = encodeKeyFile('signer-public', a.app.keys.signer.publicKey);
    const keys = keepKeys(a, world.root);

    // Same signer, no policy: the engine's own jobs come back enabled.
    const open = await engineIn(t, world, keys);
    const plain = await open.post('/control-plane/import', { ...signed, signerPublicKey });
    t.equal(plain.status, 200, plain.text);
    t.match(plain.json(), {
      sameSigner: true,
      heldByApproval: false,
      items: [{ enabled: true }, { enabled: true }],
    });

    // Same signer, configuration approval on: held disabled, so enabling needs a second person.
    const held = await engineIn(t, world, keys);
    await held.app.state.settings.set('config.approval.enabled', {
      enabled: true,
      by: 'test',
      at: new Date().toISOString(),
    });
    const r = await held.post('/control-plane/import', { ...signed, signerPublicKey });
    t.equal(r.status, 200, r.text);
    t.match(r.json(), {
      sameSigner: true,
      heldByApproval: true,
      items: [
        { id: 'docs', outcome: 'imported', enabled: false },
        { id: 'photos', outcome: 'imported', enabled: false },
      ],
    });
    t.equal((await held.app.state.jobs.get('docs'))?.config.enabled, false);
  },
);
