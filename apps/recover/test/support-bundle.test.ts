/**
 * `coffer-recover bundle open` on bundles built here from docs/support-bundle.md with
 * @coffer/crypto alone (an independent writer, so the reader is checked against the documented
 * format, not against the engine's code): signed, unsigned, sealed; pinning; wrong key; damaged
 * capsule; forged signer; usage errors; the key file's content never printed. The engine-made
 * bundle is opened end to end in apps/engine/test/support/bundle.test.ts.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  canonicalJsonBytes,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  generateSigner,
  seal,
  sign,
  toBase64Url,
} from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { runCli } from './helpers.ts';

const CONTEXT = 'coffer/engine-support-bundle/v1';
const doc = { kind: 'engine-support-document', v: 1, jobs: { total: 4 } };

function signed(signer: ReturnType<typeof generateSigner> | null, document: object = doc) {
  const head = {
    kind: 'engine-support-bundle-signed',
    v: 1,
    document,
    signer: signer
      ? { fingerprint: fingerprint(signer.publicKey), publicKey: toBase64Url(signer.publicKey) }
      : null,
  };
  return {
    ...head,
    signature: signer ? toBase64Url(sign(signer.secretKey, canonicalJsonBytes(head), CONTEXT)) : '',
  };
}

async function sealed(inner: object, vendorPublic: Uint8Array) {
  const recipient = fingerprint(vendorPublic);
  const aad = canonicalJsonBytes({ kind: 'engine-support-bundle-sealed', v: 1, recipient });
  const capsule = await seal(vendorPublic, canonicalJsonBytes(inner), aad);
  return { kind: 'engine-support-bundle-sealed', v: 1, recipient, capsule: toBase64Url(capsule) };
}

t.test('bundle open', async (t) => {
  const dir = tempDir(t);
  const signer = generateSigner();
  const vendor = generateRecipient();
  const other = generateRecipient();
  const vendorKey = join(dir, 'vendor.key');
  const otherKey = join(dir, 'other.key');
  const vendorKeyText = encodeKeyFile('recipient-secret', vendor.secretKey);
  writeFileSync(vendorKey, vendorKeyText, { mode: 0o600 });
  writeFileSync(otherKey, encodeKeyFile('recipient-secret', other.secretKey), { mode: 0o600 });
  const file = (name: string, value: unknown) => {
    const p = join(dir, name);
    writeFileSync(p, typeof value === 'string' ? value : JSON.stringify(value));
    return p;
  };
  const fp = fingerprint(signer.publicKey);

  const s = file('signed.json', signed(signer));
  let r = await runCli(['bundle', 'open', '--pin-signer', fp, s]);
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout), doc, 'prints the document');
  r = await runCli(['bundle', 'open', s]);
  t.match(r.stderr, /not pinned/, 'trust on first use is said');

  const sl = file('sealed.json', await sealed(signed(signer), vendor.publicKey));
  r = await runCli(['bundle', 'open', '--json', '--key', vendorKey, '--pin-signer', fp, sl]);
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout), {
    ok: true,
    command: 'bundle',
    sealed: true,
    signed: true,
    signer: fp,
    document: doc,
  });
  r = await runCli(['bundle', 'open', '--key', '-', sl], { input: vendorKeyText });
  t.equal(r.code, 0, 'key from stdin');

  const unsignedSealed = file('unsigned-sealed.json', await sealed(signed(null), vendor.publicKey));
  r = await runCli(['bundle', 'open', '--json', '--key', vendorKey, unsignedSealed]);
  t.equal(r.code, 0);
  t.same([JSON.parse(r.stdout).signed, JSON.parse(r.stdout).sealed], [false, true]);

  t.equal((await runCli(['bundle', 'open', '--key', otherKey, sl])).code, 4, 'sealed to another key');
  t.equal((await runCli(['bundle', 'open', '--pin-signer', `sha384:${'1'.repeat(96)}`, s])).code, 8);
  const impostor = generateSigner();
  const swapped = { ...signed(impostor), signer: signed(signer).signer };
  t.equal(
    (await runCli(['bundle', 'open', file('swapped.json', swapped)])).code,
    3,
    'signature by another key',
  );
  const lying = signed(impostor);
  lying.signer = { ...lying.signer!, fingerprint: fp };
  t.equal(
    (await runCli(['bundle', 'open', file('lying.json', lying)])).code,
    3,
    'fingerprint not of the embedded key',
  );
  const bad = await sealed(signed(signer), vendor.publicKey);
  const damaged = { ...bad, capsule: `${bad.capsule.slice(0, -6)}AAAAAA` };
  t.equal((await runCli(['bundle', 'open', '--key', vendorKey, file('damaged.json', damaged)])).code, 3);
  t.equal((await runCli(['bundle', 'open', file('notjson.json', '{nope')])).code, 3);
  t.equal(
    (await runCli(['bundle', 'open', file('other-kind.json', { kind: 'engine-audit-feed', v: 1 })])).code,
    3,
  );
  t.equal((await runCli(['bundle', 'open', file('v9.json', { ...signed(signer), v: 9 })])).code, 6);
  for (const args of [
    ['bundle'],
    ['bundle', 'open'],
    ['bundle', 'open', 'a.json', 'b.json'],
    ['bundle', 'open', '--pin-signer', 'nope', s],
    ['bundle', 'open', '--secret', 'x', s],
  ]) {
    r = await runCli(args);
    t.equal(r.code, 2, args.join(' '));
    t.notMatch(r.stderr, /BEGIN/, 'no key text');
  }
  r = await runCli(['help', 'bundle']);
  t.match(r.stdout, /bundle open/);
  r = await runCli(['bundle', 'open', '--key', vendorKey, file('damaged2.json', damaged)]);
  t.notOk(r.stderr.includes(vendorKeyText.split('\n')[1] ?? 'unreachable'), 'key body never printed');
});
