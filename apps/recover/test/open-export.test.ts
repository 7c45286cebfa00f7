/**
 * `coffer-recover open-export` on sealed control-plane exports built here from
 * docs/control-plane.md "Sealed artefact" with @coffer/crypto alone (an independent writer, so
 * the reader is checked against the documented format, not the engine's code): opened and written
 * out; pinning; another key (exit 4); a damaged capsule, a forged header, a body that does not
 * match its hash (exit 3); another version (exit 6); files present (exit 7); usage (exit 2); the
 * key file's content never printed. The engine-made artefact is opened end to end in
 * apps/engine/test/control-plane/recovery.test.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  canonicalJson,
  canonicalJsonBytes,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  generateSigner,
  seal,
  sha384Digest,
  sign,
  toBase64Url,
} from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { runCli } from './helpers.ts';

const enc = new TextEncoder();

async function artefact(
  signer: ReturnType<typeof generateSigner>,
  recipient: Uint8Array,
  tweak: { body?: Uint8Array; v?: number; headerSigner?: ReturnType<typeof generateSigner> } = {},
) {
  const text = canonicalJson({ v: 1, kind: 'coffer-control-plane-export', slices: {} });
  const signed = {
    v: 1,
    kind: 'coffer-control-plane-signed-export',
    signerFingerprint: fingerprint(signer.publicKey),
    export: text,
    signature: toBase64Url(sign(signer.secretKey, enc.encode(text), 'coffer/control-plane-export/v1')),
  };
  const body = canonicalJsonBytes(signed);
  const header = {
    v: 1,
    kind: 'coffer-control-plane-sealed-header',
    createdAt: '2026-11-26T00:00:00.000Z',
    signerFingerprint: fingerprint(signer.publicKey),
    recipient: fingerprint(recipient),
    bodyHash: sha384Digest(body),
    bodyBytes: body.byteLength,
  };
  const aad = canonicalJsonBytes(header);
  return {
    signed,
    body,
    sealed: {
      v: tweak.v ?? 1,
      kind: 'coffer-control-plane-sealed-export',
      header,
      headerSignature: toBase64Url(
        sign((tweak.headerSigner ?? signer).secretKey, aad, 'coffer/control-plane-sealed-header/v1'),
      ),
      signerPublicKey: toBase64Url(signer.publicKey),
      capsule: toBase64Url(await seal(recipient, tweak.body ?? body, aad)),
    },
  };
}

t.test('open-export opens, checks and writes; every failure has its exit code', async (t) => {
  const dir = tempDir(t, 'coffer-open-export-');
  const signer = generateSigner();
  const bg = generateRecipient();
  const keyFile = join(dir, 'bg.key');
  const keyText = encodeKeyFile('recipient-secret', bg.secretKey);
  writeFileSync(keyFile, keyText, { mode: 0o600 });
  const write = (name: string, v: unknown) => {
    const p = join(dir, name);
    writeFileSync(p, JSON.stringify(v));
    return p;
  };
  const good = await artefact(signer, bg.publicKey);
  const file = write('good.json', good.sealed);

  const out = join(dir, 'out');
  const ok = await runCli(['open-export', '--key', keyFile, '--in', file, '--out', out, '--json']);
  t.equal(ok.code, 0, ok.stderr);
  const result = JSON.parse(ok.stdout);
  t.match(result, { ok: true, command: 'open-export', signer: fingerprint(signer.publicKey) });
  t.match(ok.stderr, /not pinned/);
  t.same(new Uint8Array(readFileSync(join(out, 'signed-export.json'))), good.body, 'the body byte for byte');
  t.equal(readFileSync(join(out, 'export.json'), 'utf8'), good.signed.export);
  t.equal(readFileSync(join(out, 'export.sig'), 'utf8').trim(), good.signed.signature);
  t.notMatch(ok.stdout + ok.stderr, keyText.split('\n')[3]!.slice(0, 20), 'no key bytes printed');

  const again = await runCli(['open-export', '--key', keyFile, '--in', file, '--out', out]);
  t.equal(again.code, 7, 'files present');
  const forced = await runCli(['open-export', '--key', keyFile, '--in', file, '--out', out, '--force']);
  t.equal(forced.code, 0, forced.stderr);

  const pinned = await runCli([
    'open-export',
    '--key',
    keyFile,
    '--in',
    file,
    '--out',
    join(dir, 'p'),
    '--pin-signer',
    fingerprint(generateSigner().publicKey),
  ]);
  t.equal(pinned.code, 8, 'another signer than the pinned one');

  const other = generateRecipient();
  const otherKey = join(dir, 'other.key');
  writeFileSync(otherKey, encodeKeyFile('recipient-secret', other.secretKey), { mode: 0o600 });
  t.equal((await runCli(['open-export', '--key', otherKey, '--in', file, '--out', join(dir, 'o')])).code, 4);

  const damaged = structuredClone(good.sealed);
  damaged.capsule = `${damaged.capsule.slice(0, 200)}${damaged.capsule[200] === 'A' ? 'B' : 'A'}${damaged.capsule.slice(201)}`;
  const d = await runCli([
    'open-export',
    '--key',
    keyFile,
    '--in',
    write('d.json', damaged),
    '--out',
    join(dir, 'd'),
  ]);
  t.equal(d.code, 3, 'damaged capsule');

  const forged = await artefact(signer, bg.publicKey, { headerSigner: generateSigner() });
  const f = await runCli([
    'open-export',
    '--key',
    keyFile,
    '--in',
    write('f.json', forged.sealed),
    '--out',
    join(dir, 'f'),
  ]);
  t.equal(f.code, 3, 'header signed by someone else');
  t.match(f.stderr, /header signature/);

  const swapped = await artefact(signer, bg.publicKey, { body: enc.encode('{"kind":"other"}') });
  const s = await runCli([
    'open-export',
    '--key',
    keyFile,
    '--in',
    write('s.json', swapped.sealed),
    '--out',
    join(dir, 's'),
  ]);
  t.equal(s.code, 3, 'a body that is not the hashed one');
  t.match(s.stderr, /hash/);

  const v2 = await artefact(signer, bg.publicKey, { v: 2 });
  t.equal(
    (
      await runCli([
        'open-export',
        '--key',
        keyFile,
        '--in',
        write('v2.json', v2.sealed),
        '--out',
        join(dir, 'v'),
      ])
    ).code,
    6,
  );

  t.equal((await runCli(['open-export', '--in', file, '--out', join(dir, 'u')])).code, 2, 'no --key');
  const stray = await runCli([
    'open-export',
    '--key',
    keyFile,
    '--in',
    file,
    '--out',
    join(dir, 'u'),
    keyText,
  ]);
  t.equal(stray.code, 2, 'a stray argument');
  t.notMatch(stray.stderr, /BEGIN COFFER/, 'a pasted key is not echoed');
  const help = await runCli(['open-export', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /restore-sealed/);
});
