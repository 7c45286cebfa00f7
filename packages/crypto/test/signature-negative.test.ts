// Negative tests for hybrid signatures: every byte flipped, stripped and swapped halves, other
// keys, truncation, unknown versions and malformed keys.
import t from 'tap';
import * as c from '../src/index.ts';
import { encodeKey } from '../src/internal/key-encoding.ts';

const enc = new TextEncoder();
const ctx = 'coffer/test/signature';
const a = c.generateSigner();
const b = c.generateSigner();
const message = enc.encode('manifest bytes');
const sigA = c.sign(a.secretKey, message, ctx);
const sigB = c.sign(b.secretKey, message, ctx);
const ED_END = 1 + 64;

t.test('every byte of a signature flipped in turn is refused', async (t) => {
  t.ok(c.verify(a.publicKey, message, sigA, ctx), 'the unflipped signature verifies');
  let accepted = 0;
  for (let i = 0; i < sigA.length; i++) {
    const bad = sigA.slice();
    bad[i]! ^= 1 << (i % 8);
    if (c.verify(a.publicKey, message, bad, ctx)) accepted++;
  }
  t.equal(accepted, 0, `none of ${sigA.length} flipped signatures verifies`);
});

t.test('stripped, swapped and foreign halves are refused', async (t) => {
  // Stripped: one half only, or one half zeroed.
  t.notOk(c.verify(a.publicKey, message, sigA.subarray(0, ED_END), ctx));
  t.notOk(c.verify(a.publicKey, message, Uint8Array.of(1, ...sigA.subarray(ED_END)), ctx));
  const noEd = sigA.slice();
  noEd.fill(0, 1, ED_END);
  t.notOk(c.verify(a.publicKey, message, noEd, ctx), 'Ed25519 half zeroed');
  const noDsa = sigA.slice();
  noDsa.fill(0, ED_END);
  t.notOk(c.verify(a.publicKey, message, noDsa, ctx), 'ML-DSA half zeroed');
  // Swapped: halves of two signers' signatures over the same message.
  const mixed1 = Uint8Array.of(...sigA.subarray(0, ED_END), ...sigB.subarray(ED_END));
  const mixed2 = Uint8Array.of(...sigB.subarray(0, ED_END), ...sigA.subarray(ED_END));
  for (const pk of [a.publicKey, b.publicKey]) {
    t.notOk(c.verify(pk, message, mixed1, ctx));
    t.notOk(c.verify(pk, message, mixed2, ctx));
  }
  // Swapped across messages: both halves from the same key, but signed over different messages.
  const other = enc.encode('another manifest');
  const sigOther = c.sign(a.secretKey, other, ctx);
  const crossed = Uint8Array.of(...sigA.subarray(0, ED_END), ...sigOther.subarray(ED_END));
  t.notOk(c.verify(a.publicKey, message, crossed, ctx));
  t.notOk(c.verify(a.publicKey, other, crossed, ctx));
  // A key built from one half of each signer verifies neither original signature.
  const edA = a.publicKey.subarray(2, 34);
  const dsaB = b.publicKey.subarray(34);
  const franken = encodeKey('signer-public', edA, dsaB);
  t.notOk(c.verify(franken, message, sigA, ctx));
  t.notOk(c.verify(franken, message, sigB, ctx));
  t.not(c.fingerprint(franken), c.fingerprint(a.publicKey));
  // Another key, another context, another message.
  t.notOk(c.verify(b.publicKey, message, sigA, ctx));
  t.notOk(c.verify(a.publicKey, message, sigA, `${ctx}/2`));
  t.notOk(c.verify(a.publicKey, enc.encode('manifest bytez'), sigA, ctx));
});

t.test('context is length-prefixed: moving bytes between context and message fails', async (t) => {
  const s = c.sign(a.secretKey, enc.encode('bc'), 'a');
  t.ok(c.verify(a.publicKey, enc.encode('bc'), s, 'a'));
  t.notOk(c.verify(a.publicKey, enc.encode('c'), s, 'ab'));
  t.notOk(c.verify(a.publicKey, enc.encode('abc'), s, ''));
  t.throws(
    () => c.sign(a.secretKey, message, '\ud800'),
    { code: 'ERR_CRYPTO_MALFORMED' },
    'lone surrogate context',
  );
  t.notOk(c.verify(a.publicKey, message, sigA, '\ud800'));
});

t.test('truncated, extended and unknown-version signatures are refused', async (t) => {
  for (const n of [0, 1, 64, 65, sigA.length - 1])
    t.notOk(c.verify(a.publicKey, message, sigA.subarray(0, n), ctx));
  t.notOk(c.verify(a.publicKey, message, Uint8Array.of(...sigA, 0), ctx));
  const v2 = sigA.slice();
  v2[0] = 2;
  t.notOk(c.verify(a.publicKey, message, v2, ctx));
  t.notOk(c.verify(a.publicKey, message, 'not bytes' as unknown as Uint8Array, ctx));
  t.throws(() => c.assertSignature(a.publicKey, message, v2, ctx), { code: 'ERR_CRYPTO_BAD_SIGNATURE' });
});

t.test('malformed, unsupported and wrong-kind keys throw', async (t) => {
  t.throws(() => c.verify(a.publicKey.subarray(0, 100), message, sigA, ctx), {
    code: 'ERR_CRYPTO_MALFORMED',
  });
  t.throws(() => c.verify(new Uint8Array(0), message, sigA, ctx), { code: 'ERR_CRYPTO_MALFORMED' });
  const v2 = a.publicKey.slice();
  v2[0] = 2;
  t.throws(() => c.verify(v2, message, sigA, ctx), { code: 'ERR_CRYPTO_UNSUPPORTED_VERSION' });
  const unknownKind = a.publicKey.slice();
  unknownKind[1] = 9;
  t.throws(() => c.verify(unknownKind, message, sigA, ctx), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.verify(c.generateRecipient().publicKey, message, sigA, ctx), {
    code: 'ERR_CRYPTO_WRONG_KIND',
  });
  t.throws(() => c.verify(a.secretKey, message, sigA, ctx), { code: 'ERR_CRYPTO_WRONG_KIND' });
  t.throws(() => c.sign(a.publicKey, message, ctx), { code: 'ERR_CRYPTO_WRONG_KIND' });
  t.throws(() => c.sign(a.secretKey.subarray(1), message, ctx), { code: 'ERR_CRYPTO_UNSUPPORTED_VERSION' });
  t.throws(() => c.sign(a.secretKey.subarray(0, 30), message, ctx), { code: 'ERR_CRYPTO_MALFORMED' });
  // An Ed25519 public key that is not a curve point.
  const badPoint = a.publicKey.slice();
  badPoint.fill(0xff, 2, 34);
  t.throws(() => c.verify(badPoint, message, sigA, ctx), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.signerPublicKeyFromSecret(c.generateRecipient().secretKey), {
    code: 'ERR_CRYPTO_WRONG_KIND',
  });
});
