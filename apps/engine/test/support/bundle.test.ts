/**
 * Support bundles: the four states of the specification's table (each opened by the real
 * `coffer-recover bundle open` CLI as a child process), the engine generating a sealed bundle over
 * HTTP that the CLI unseals and verifies with the vendor key (wrong key, tampering and pin
 * mismatch refused with their exit codes), the browser-error ring (scrubbed, bounded, oversize
 * body refused unread with 400), the diagnostics pull, and a document free of job ids and paths.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, fromBase64Url, generateRecipient, generateSigner, toBase64Url } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { makeBundle, openBundle, type SupportBundle } from '../../src/bundle/index.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';

const CLI = join(import.meta.dirname, '..', '..', '..', 'recover', 'src', 'cli.ts');
const admin = bearer();

function cli(args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test('the four bundle states open with coffer-recover', async (t) => {
  const dir = tempDir(t);
  const signer = generateSigner();
  const vendor = generateRecipient();
  const keyFile = join(dir, 'vendor.key');
  writeFileSync(keyFile, encodeKeyFile('recipient-secret', vendor.secretKey), { mode: 0o600 });
  const doc = { kind: 'engine-support-document', v: 1, jobs: { total: 2 } };
  const states: Array<[string, boolean, boolean, string]> = [
    ['no signer, no vendor key', false, false, 'engine-support-bundle-signed'],
    ['no signer, vendor key', false, true, 'engine-support-bundle-sealed'],
    ['signer, no vendor key', true, false, 'engine-support-bundle-signed'],
    ['signer, vendor key', true, true, 'engine-support-bundle-sealed'],
  ];
  for (const [name, signed, sealed, kind] of states) {
    const bundle = await makeBundle(doc, signed ? signer : null, sealed ? vendor.publicKey : null);
    t.equal(bundle.kind, kind, `${name}: kind`);
    if (bundle.kind === 'engine-support-bundle-signed') {
      t.equal(bundle.signature === '', !signed, `${name}: empty signature iff no signer`);
    }
    const opened = await openBundle(bundle, vendor.secretKey);
    t.same([opened.signed, opened.sealed], [signed, sealed], `${name}: in-process reader`);
    const file = join(dir, `${kind}-${signed}.json`);
    writeFileSync(file, JSON.stringify(bundle));
    const r = cli(['bundle', 'open', '--json', ...(sealed ? ['--key', keyFile] : []), file]);
    t.equal(r.code, 0, `${name}: CLI exit 0 (${r.stderr})`);
    const out = JSON.parse(r.stdout);
    t.same([out.signed, out.sealed, out.document.jobs.total], [signed, sealed, 2], `${name}: CLI result`);
    if (!signed) {
      t.match(r.stderr, /unsigned/, `${name}: unsigned note`);
      const pinned = cli([
        'bundle',
        'open',
        '--pin-signer',
        `sha384:${'0'.repeat(96)}`,
        ...(sealed ? ['--key', keyFile] : []),
        file,
      ]);
      t.equal(pinned.code, 3, `${name}: a pin demands a signature`);
    }
  }
  // A forged document under a valid-looking signature fails (exit 3).
  const good = (await makeBundle(doc, signer, null)) as Extract<
    SupportBundle,
    { kind: 'engine-support-bundle-signed' }
  >;
  const forged = { ...good, document: { ...doc, jobs: { total: 3 } } };
  writeFileSync(join(dir, 'forged.json'), JSON.stringify(forged));
  t.equal(cli(['bundle', 'open', join(dir, 'forged.json')]).code, 3, 'forged document');
  const v2 = { ...good, v: 2 };
  writeFileSync(join(dir, 'v2.json'), JSON.stringify(v2));
  t.equal(cli(['bundle', 'open', join(dir, 'v2.json')]).code, 6, 'unsupported version');
  t.equal(cli(['bundle', 'open', join(dir, 'absent.json')]).code, 5, 'missing file');
  t.equal(cli(['bundle', 'open']).code, 2, 'usage');
  t.equal(cli(['bundle', 'close', 'x.json']).code, 2, 'unknown subcommand');
});

t.test('the engine seals to the vendor key; the CLI unseals and verifies', async (t) => {
  const dir = tempDir(t);
  const vendor = generateRecipient();
  const other = generateRecipient();
  const keyFile = join(dir, 'vendor.key');
  const otherFile = join(dir, 'other.key');
  writeFileSync(keyFile, encodeKeyFile('recipient-secret', vendor.secretKey), { mode: 0o600 });
  writeFileSync(otherFile, encodeKeyFile('recipient-secret', other.secretKey), { mode: 0o600 });
  const e = await startEngine(t, {
    ENGINE_SUPPORT_PUBLIC_KEY: encodeKeyFile('recipient-public', vendor.publicKey),
  });
  await http(`${e.url}/admin/jobs`, {
    headers: admin,
    body: {
      id: 'customer-acme-payroll',
      cadenceSeconds: 3600,
      source: { type: 'files', path: '/srv/acme/payroll' },
    },
  });
  const support = (await http(`${e.url}/admin/support`, { headers: admin })).json();
  t.same(support.vendorSealingKey.present, true);
  t.equal(support.bundleKind, 'engine-support-bundle-sealed');
  const signerFp: string = support.signer.fingerprint;

  const res = await http(`${e.url}/admin/support/bundle`, { headers: admin });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-disposition'), /attachment; filename="coffer-support-bundle-\d+\.json"/);
  const bundle = res.json();
  t.equal(bundle.kind, 'engine-support-bundle-sealed');
  const file = join(dir, 'bundle.json');
  writeFileSync(file, res.text);

  const opened = cli(['bundle', 'open', '--json', '--key', keyFile, '--pin-signer', signerFp, file]);
  t.equal(opened.code, 0, opened.stderr);
  const out = JSON.parse(opened.stdout);
  t.same([out.sealed, out.signed, out.signer], [true, true, signerFp]);
  const doc = out.document;
  t.equal(doc.kind, 'engine-support-document');
  t.same(doc.jobs, { total: 1, enabled: 1, paused: 0, sourceKinds: { files: 1 } });
  t.same(doc.keys.supportKeyPresent, true);
  t.same(doc.destinations.kinds, { fs: 1 });
  const text = JSON.stringify(doc);
  for (const leak of ['customer-acme-payroll', '/srv/acme', 'test-admin-token', e.dataDir]) {
    t.notOk(text.includes(leak), `no ${leak} in the document`);
  }

  t.equal(cli(['bundle', 'open', '--key', otherFile, file]).code, 4, 'another key: exit 4');
  t.equal(cli(['bundle', 'open', file]).code, 2, 'sealed without --key: usage');
  t.equal(
    cli(['bundle', 'open', '--key', keyFile, '--pin-signer', `sha384:${'a'.repeat(96)}`, file]).code,
    8,
    'pin mismatch',
  );
  const capsule = fromBase64Url(bundle.capsule);
  capsule[capsule.length - 5]! ^= 1;
  writeFileSync(join(dir, 'tampered.json'), JSON.stringify({ ...bundle, capsule: toBase64Url(capsule) }));
  t.equal(cli(['bundle', 'open', '--key', keyFile, join(dir, 'tampered.json')]).code, 3, 'tampered capsule');

  // The pull endpoint serves the same kind of bundle; both generations are audited.
  const cred = (
    await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'diagnostics' } })
  ).json();
  const pulled = await http(`${e.url}/support/diagnostics`, {
    headers: { authorization: `Bearer ${cred.credential}` },
  });
  t.equal(pulled.status, 200);
  t.equal(pulled.json().kind, 'engine-support-bundle-sealed');
  const events = (
    await http(`${e.url}/admin/audit?action=support-bundle-generate`, { headers: admin })
  ).json().events;
  t.equal(events.length, 2);
  t.equal(events[0].actor.method, 'pull-credential');
  t.equal(events[0].actor.subject, 'pull:diagnostics');
  t.same(events[1].detail, {
    kind: 'engine-support-bundle-sealed',
    signed: true,
    sealed: true,
    browserErrors: 0,
  });
});

t.test('POST folds in a scrubbed, bounded browser error ring; oversize is refused unread', async (t) => {
  const e = await startEngine(t);
  const post = (body: unknown) => http(`${e.url}/admin/support/bundle`, { headers: admin, body });
  const r = await post({
    browserErrors: [
      {
        message: 'fetch failed https://user:hunter2pass@console.example.com/admin/jobs?token=abc#x',
        at: '2025-01-02T03:04:05Z',
      },
      { message: 'TypeError: x is undefined', source: 'https://console.example.com/app.js?v=1' },
      { message: 'leaked Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnopqrstu' },
    ],
  });
  t.equal(r.status, 200);
  const bundle = r.json();
  t.equal(bundle.kind, 'engine-support-bundle-signed', 'no vendor key: signed kind');
  t.not(bundle.signature, '');
  const errors = bundle.document.browserErrors;
  t.equal(errors.length, 3);
  t.equal(errors[0].message, 'fetch failed https://console.example.com');
  t.equal(errors[0].at, '2025-01-02T03:04:05.000Z');
  t.equal(errors[1].source, 'https://console.example.com');
  t.notMatch(JSON.stringify(errors), /hunter2|eyJhbGci|token=abc/);
  t.equal((await openBundle(bundle)).signed, true, 'the signature covers the folded ring');
  // Discarded after: the next bundle has none.
  t.equal(
    (await http(`${e.url}/admin/support/bundle`, { headers: admin })).json().document.browserErrors,
    undefined,
  );

  const many = Array.from({ length: 51 }, (_, i) => ({ message: `e${i}` }));
  t.equal((await post({ browserErrors: many })).status, 400, 'more than 50 entries');
  t.equal((await post({ browserErrors: [{ message: 'x'.repeat(1025) }] })).status, 400, 'entry over 1 KiB');
  t.equal((await post({ browserErrors: [], extra: 1 })).status, 400, 'unknown field');
  const huge = await http(`${e.url}/admin/support/bundle`, {
    headers: { ...admin, 'content-type': 'application/json' },
    raw: JSON.stringify({ browserErrors: [{ message: 'y'.repeat(70 * 1024) }] }),
  });
  t.equal(huge.status, 400, 'oversize body refused before it is read (400, the Errors table)');
  t.same(huge.json(), { error: 'request body too large' });
  t.equal(
    (await http(`${e.url}/admin/support/bundle`, { method: 'POST', body: {} })).status,
    401,
    'authentication first',
  );
});
