// Negative tests for sealing: every byte of a capsule flipped, wrong recipient, wrong aad,
// truncation, unknown version, wrong key kinds and bad wrapped-key lists.
import t from 'tap';
import type { CryptoError } from '../src/index.ts';
import * as c from '../src/index.ts';

const enc = new TextEncoder();
const r = c.generateRecipient();
const other = c.generateRecipient();
const aad = enc.encode('archive 42');
const plaintext = c.randomBytes(32);
const capsule = await c.seal(r.publicKey, plaintext, aad);

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'opened';
  } catch (e) {
    return (e as CryptoError).code ?? 'not a CryptoError';
  }
}

t.test('every byte of a capsule flipped in turn is refused', async (t) => {
  t.same(await c.open(r.secretKey, capsule, aad), plaintext, 'the unflipped capsule opens');
  const codes = new Map<string, number>();
  for (let i = 0; i < capsule.length; i++) {
    const bad = capsule.slice();
    bad[i]! ^= 1 << (i % 8);
    const code = await codeOf(c.open(r.secretKey, bad, aad));
    codes.set(code, (codes.get(code) ?? 0) + 1);
  }
  t.same(
    Object.fromEntries(codes),
    { ERR_CRYPTO_UNSUPPORTED_VERSION: 1, ERR_CRYPTO_WRONG_KEY: 48, ERR_CRYPTO_TAMPERED: capsule.length - 49 },
    `all ${capsule.length} flipped capsules refused: version byte, key id, then authentication`,
  );
});

t.test('wrong recipient, wrong aad, truncation, extension, unknown version', async (t) => {
  await t.rejects(c.open(other.secretKey, capsule, aad), { code: 'ERR_CRYPTO_WRONG_KEY' });
  await t.rejects(c.open(r.secretKey, capsule, enc.encode('archive 43')), { code: 'ERR_CRYPTO_TAMPERED' });
  await t.rejects(c.open(r.secretKey, capsule, new Uint8Array(0)), { code: 'ERR_CRYPTO_TAMPERED' });
  await t.rejects(c.open(r.secretKey, new Uint8Array(0), aad), { code: 'ERR_CRYPTO_MALFORMED' });
  for (const n of [1, 49, 81, c.CAPSULE_MIN_BYTES - 1]) {
    await t.rejects(
      c.open(r.secretKey, capsule.subarray(0, n), aad),
      { code: 'ERR_CRYPTO_MALFORMED' },
      `cut to ${n}`,
    );
  }
  for (const n of [c.CAPSULE_MIN_BYTES, capsule.length - 1]) {
    await t.rejects(
      c.open(r.secretKey, capsule.subarray(0, n), aad),
      { code: 'ERR_CRYPTO_TAMPERED' },
      `cut to ${n}`,
    );
  }
  await t.rejects(c.open(r.secretKey, Uint8Array.of(...capsule, 0), aad), { code: 'ERR_CRYPTO_TAMPERED' });
  const v2 = capsule.slice();
  v2[0] = 2;
  await t.rejects(c.open(r.secretKey, v2, aad), { code: 'ERR_CRYPTO_UNSUPPORTED_VERSION' });
  // The ephemeral X25519 key replaced by a low-order point.
  const lowOrder = capsule.slice();
  lowOrder.fill(0, 49, 81);
  await t.rejects(c.open(r.secretKey, lowOrder, aad), { code: 'ERR_CRYPTO_TAMPERED' });
});

t.test('wrong key kinds and malformed recipient keys', async (t) => {
  const s = c.generateSigner();
  await t.rejects(c.seal(r.secretKey, plaintext, aad), { code: 'ERR_CRYPTO_WRONG_KIND' });
  await t.rejects(c.seal(s.publicKey, plaintext, aad), { code: 'ERR_CRYPTO_WRONG_KIND' });
  await t.rejects(c.open(r.publicKey, capsule, aad), { code: 'ERR_CRYPTO_WRONG_KIND' });
  await t.rejects(c.open(s.secretKey, capsule, aad), { code: 'ERR_CRYPTO_WRONG_KIND' });
  await t.rejects(c.seal(r.publicKey.subarray(0, 1601), plaintext, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  const v9 = r.publicKey.slice();
  v9[0] = 9;
  await t.rejects(c.seal(v9, plaintext, aad), { code: 'ERR_CRYPTO_UNSUPPORTED_VERSION' });
  // A low-order X25519 half, and an ML-KEM key with out-of-range coefficients (FIPS 203 modulus check).
  const lowOrder = r.publicKey.slice();
  lowOrder.fill(0, 2, 34);
  await t.rejects(c.seal(lowOrder, plaintext, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  const badKem = r.publicKey.slice();
  badKem.fill(0xff, 34, 40);
  await t.rejects(c.seal(badKem, plaintext, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  await t.rejects(c.seal(r.publicKey, 'text' as unknown as Uint8Array, aad), {
    code: 'ERR_CRYPTO_MALFORMED',
  });
});

t.test('wrapped key lists', async (t) => {
  const dataKey = c.randomBytes(32);
  const wrapped = await c.wrapKey(dataKey, [r.publicKey], aad);
  await t.rejects(c.unwrapKey(other.secretKey, wrapped, aad), { code: 'ERR_CRYPTO_WRONG_KEY' });
  await t.rejects(c.unwrapKey(other.secretKey, [], aad), { code: 'ERR_CRYPTO_WRONG_KEY' });
  await t.rejects(c.unwrapKey(r.secretKey, wrapped, enc.encode('x')), { code: 'ERR_CRYPTO_TAMPERED' });
  const cut = [
    {
      recipient: wrapped[0]!.recipient,
      capsule: c.toBase64Url(c.fromBase64Url(wrapped[0]!.capsule).subarray(0, -3)),
    },
  ];
  await t.rejects(c.unwrapKey(r.secretKey, cut, aad), { code: 'ERR_CRYPTO_TAMPERED' });
  const garbage = [{ recipient: wrapped[0]!.recipient, capsule: '***' }];
  await t.rejects(c.unwrapKey(r.secretKey, garbage, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  const badEntry = [{ recipient: 'sha384:xyz', capsule: '' }] as unknown as c.WrappedKey[];
  await t.rejects(c.unwrapKey(other.secretKey, badEntry, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  // An entry relabelled with another recipient's fingerprint is still refused by that recipient.
  const relabelled = [{ recipient: c.fingerprint(other.publicKey), capsule: wrapped[0]!.capsule }];
  await t.rejects(c.unwrapKey(other.secretKey, relabelled, aad), { code: 'ERR_CRYPTO_WRONG_KEY' });
  await t.rejects(c.wrapKey(new Uint8Array(0), [r.publicKey], aad), { code: 'ERR_CRYPTO_MALFORMED' });
  await t.rejects(c.wrapKey(dataKey, [r.secretKey], aad), { code: 'ERR_CRYPTO_WRONG_KIND' });
});
