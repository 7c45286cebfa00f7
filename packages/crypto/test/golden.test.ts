// The committed golden vectors (test/vectors/golden-v1.json and golden-*.key) must keep
// verifying, opening and decoding, and a rebuild from the same seeds must reproduce them byte for
// byte. A failure here is a format break: bump the version byte and document it in docs/crypto.md.
import { readFileSync } from 'node:fs';
import t from 'tap';
import * as browser from '../src/browser.ts';
import * as c from '../src/index.ts';
import { fromHex } from '../src/internal/bytes.ts';
import { nodePlatform } from '../src/internal/platform-node.ts';
import { openWith, PURPOSE_WRAP_KEY } from '../src/internal/seal.ts';
import { buildGolden, type Golden } from './vectors/golden.ts';

const dir = new URL('./vectors/', import.meta.url);
const golden = JSON.parse(readFileSync(new URL('golden-v1.json', dir), 'utf8')) as Golden;

t.test('committed signature verifies on both builds', async (t) => {
  const { publicKey, message, signature, context } = golden.signer;
  for (const api of [c, browser]) {
    t.ok(api.verify(fromHex(publicKey), fromHex(message), fromHex(signature), context), api.platformName);
    t.notOk(api.verify(fromHex(publicKey), fromHex(message), fromHex(signature), `${context}x`));
  }
  t.same(c.signerPublicKeyFromSecret(fromHex(golden.signer.secretKey)), fromHex(publicKey));
});

t.test('committed capsules open on both builds', async (t) => {
  const r = golden.recipient;
  for (const api of [c, browser]) {
    t.same(await api.open(fromHex(r.secretKey), fromHex(r.capsule), fromHex(r.aad)), fromHex(r.plaintext));
    const wrapped = [
      { recipient: api.fingerprint(fromHex(r.publicKey)), capsule: api.toBase64Url(fromHex(r.wrapCapsule)) },
    ];
    t.same(await api.unwrapKey(fromHex(r.secretKey), wrapped, fromHex(r.aad)), fromHex(r.wrapDataKey));
  }
  t.same(
    await openWith(
      nodePlatform,
      fromHex(r.secretKey),
      fromHex(r.wrapCapsule),
      fromHex(r.aad),
      PURPOSE_WRAP_KEY,
    ),
    fromHex(r.wrapDataKey),
  );
});

t.test('committed key files decode to the committed keys', async (t) => {
  const expected = {
    'signer-public': golden.signer.publicKey,
    'signer-secret': golden.signer.secretKey,
    'recipient-public': golden.recipient.publicKey,
    'recipient-secret': golden.recipient.secretKey,
  } as const;
  for (const kind of Object.keys(expected) as (keyof typeof expected)[]) {
    const text = readFileSync(new URL(`golden-${kind}.key`, dir), 'utf8');
    t.equal(text, golden.keyFiles[kind]);
    t.same(c.decodeKeyFile(text, kind), { kind, key: fromHex(expected[kind]) });
  }
});

t.test('a rebuild from the fixed seeds reproduces every committed byte', async (t) => {
  t.same(await buildGolden(), golden);
});
