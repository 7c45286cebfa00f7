// Round trips of the whole public API on the node build, and the export-list parity of both builds.
import { readFileSync } from 'node:fs';
import t from 'tap';
import * as browser from '../src/browser.ts';
import * as c from '../src/index.ts';

const enc = new TextEncoder();

t.test('browser.ts is index.ts with only the header comment and the platform import changed', async (t) => {
  const strip = (file: string) =>
    readFileSync(new URL(`../src/${file}`, import.meta.url), 'utf8')
      .replace(/^\/\*\*[\s\S]*?\*\/\n/, '')
      .replace(/^import \{ (node|web)Platform as platform \} from .*\n/m, '');
  t.equal(strip('browser.ts'), strip('index.ts'));
});

t.test('both entry points export the same names', async (t) => {
  t.same(Object.keys(browser).sort(), Object.keys(c).sort());
  t.equal(c.platformName, 'node');
  t.equal(browser.platformName, 'web');
});

t.test('sha384 helpers', async (t) => {
  const abc = enc.encode('abc');
  // FIPS 180-2 appendix D.1 example "abc".
  const expected =
    'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7';
  t.equal(c.sha384Digest(abc), `sha384:${expected}`);
  t.equal(c.toHex(c.sha384(abc)), expected);
  const h = c.createSha384();
  h.update(enc.encode('a')).update(enc.encode('bc'));
  t.equal(c.toHex(h.digest()), expected);
  t.same(c.parseDigest(`sha384:${expected}`), c.sha384(abc));
  t.throws(() => c.parseDigest(`sha384:${expected.toUpperCase()}`), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.parseDigest('sha256:00'), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.formatDigest(new Uint8Array(47)), { code: 'ERR_CRYPTO_MALFORMED' });
});

t.test('encodings and constant-time equality', async (t) => {
  const bytes = Uint8Array.from([0, 1, 2, 250, 251, 252, 253, 254, 255]);
  for (let n = 0; n <= bytes.length; n++) {
    const b = bytes.subarray(0, n);
    t.same(c.fromHex(c.toHex(b)), b);
    t.same(c.fromBase64Url(c.toBase64Url(b)), b);
    t.equal(c.toBase64Url(b), Buffer.from(b).toString('base64url'));
  }
  t.throws(() => c.fromHex('abc'), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.fromHex('zz'), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.fromBase64Url('ab+/'), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.fromBase64Url('AB'), { code: 'ERR_CRYPTO_MALFORMED' }, 'non-canonical trailing bits');
  t.ok(c.constantTimeEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2)));
  t.notOk(c.constantTimeEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 3)));
  t.notOk(c.constantTimeEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2, 3)));
  t.equal(c.randomBytes(70000).length, 70000);
  t.throws(() => c.randomBytes(-1), { code: 'ERR_CRYPTO_MALFORMED' });
});

t.test('canonical JSON: RFC 8785 section 3.2.2 and 3.2.3 examples', async (t) => {
  const input = JSON.parse(
    '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
      '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
  );
  t.equal(
    c.canonicalJson(input),
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
      '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  );
  const sorting = JSON.parse(
    '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",' +
      '"\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
  );
  t.equal(
    c.canonicalJson(sorting),
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
      '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    'members sorted by UTF-16 code units',
  );
});

t.test('canonical JSON (RFC 8785)', async (t) => {
  t.equal(
    c.canonicalJson({ b: 2, a: 1, c: { z: [3, 'é'], y: null } }),
    '{"a":1,"b":2,"c":{"y":null,"z":[3,"é"]}}',
  );
  t.same(c.canonicalJsonBytes({ a: '€' }), enc.encode('{"a":"€"}'));
  t.throws(() => c.canonicalJson(undefined), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.canonicalJson({ a: Number.NaN }), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.canonicalJson({ a: 1n }), { code: 'ERR_CRYPTO_MALFORMED' });
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  t.throws(() => c.canonicalJson(cyclic), { code: 'ERR_CRYPTO_MALFORMED' });
});

t.test('AEAD round trip and tamper detection', async (t) => {
  const key = c.randomBytes(32);
  const nonce = c.randomBytes(12);
  const aad = enc.encode('header');
  for (const size of [0, 1, 262143, 262144, 262145, 1 << 20]) {
    const pt = c.randomBytes(size);
    const sealed = await c.aeadEncrypt(key, nonce, pt, aad);
    t.equal(sealed.length, size + c.AEAD_TAG_BYTES);
    t.same(await c.aeadDecrypt(key, nonce, sealed, aad), pt, `node round trip ${size}`);
    t.same(await browser.aeadDecrypt(key, nonce, sealed, aad), pt, `node -> web ${size}`);
    t.same(await browser.aeadEncrypt(key, nonce, pt, aad), sealed, `web == node ${size}`);
  }
  const sealed = await c.aeadEncrypt(key, nonce, enc.encode('secret'), aad);
  sealed[0]! ^= 1;
  await t.rejects(c.aeadDecrypt(key, nonce, sealed, aad), { code: 'ERR_CRYPTO_TAMPERED' });
  await t.rejects(browser.aeadDecrypt(key, nonce, sealed, aad), { code: 'ERR_CRYPTO_TAMPERED' });
  await t.rejects(c.aeadDecrypt(key, nonce, new Uint8Array(15), aad), { code: 'ERR_CRYPTO_TAMPERED' });
  await t.rejects(c.aeadEncrypt(new Uint8Array(16), nonce, sealed, aad), { code: 'ERR_CRYPTO_MALFORMED' });
  await t.rejects(c.aeadEncrypt(key, new Uint8Array(16), sealed, aad), { code: 'ERR_CRYPTO_MALFORMED' });
});

t.test('hybrid signatures', async (t) => {
  const signer = c.generateSigner();
  const other = c.generateSigner();
  const msg = enc.encode('manifest');
  const sig = c.sign(signer.secretKey, msg, 'coffer/test');
  t.equal(sig.length, c.SIGNATURE_BYTES);
  t.ok(c.verify(signer.publicKey, msg, sig, 'coffer/test'));
  t.ok(browser.verify(signer.publicKey, msg, sig, 'coffer/test'));
  t.notOk(c.verify(signer.publicKey, msg, sig, 'coffer/other'), 'other context');
  t.notOk(c.verify(signer.publicKey, enc.encode('manifest!'), sig, 'coffer/test'), 'other message');
  t.notOk(c.verify(other.publicKey, msg, sig, 'coffer/test'), 'other key');
  t.same(c.signerPublicKeyFromSecret(signer.secretKey), signer.publicKey);
  t.doesNotThrow(() => c.assertSignature(signer.publicKey, msg, sig, 'coffer/test'));
  t.throws(() => c.assertSignature(other.publicKey, msg, sig, 'coffer/test'), {
    code: 'ERR_CRYPTO_BAD_SIGNATURE',
  });
  t.throws(() => c.verify(signer.secretKey, msg, sig, 'coffer/test'), { code: 'ERR_CRYPTO_WRONG_KIND' });
  t.throws(() => c.sign(signer.publicKey, msg, 'x'), { code: 'ERR_CRYPTO_WRONG_KIND' });
});

t.test('sealing and key wrapping', async (t) => {
  const r = c.generateRecipient();
  const other = c.generateRecipient();
  const aad = enc.encode('archive-id');
  const capsule = await c.seal(r.publicKey, enc.encode('data key'), aad);
  t.equal(capsule.length, c.CAPSULE_MIN_BYTES + 8);
  t.same(await c.open(r.secretKey, capsule, aad), enc.encode('data key'));
  await t.rejects(c.open(other.secretKey, capsule, aad), { code: 'ERR_CRYPTO_WRONG_KEY' });
  await t.rejects(c.open(r.secretKey, capsule, enc.encode('other')), { code: 'ERR_CRYPTO_TAMPERED' });
  t.same(c.recipientPublicKeyFromSecret(r.secretKey), r.publicKey);

  const dataKey = c.randomBytes(32);
  const wrapped = await c.wrapKey(dataKey, [r.publicKey, other.publicKey, r.publicKey], aad);
  t.equal(wrapped.length, 2, 'duplicates removed');
  t.equal(wrapped[0]!.recipient, c.fingerprint(r.publicKey));
  t.same(await c.unwrapKey(r.secretKey, wrapped, aad), dataKey);
  t.same(await browser.unwrapKey(other.secretKey, wrapped, aad), dataKey);
  await t.rejects(c.unwrapKey(c.generateRecipient().secretKey, wrapped, aad), {
    code: 'ERR_CRYPTO_WRONG_KEY',
  });
  // A wrapped key is not a sealed message: the purpose byte keeps them apart.
  await t.rejects(c.open(r.secretKey, c.fromBase64Url(wrapped[0]!.capsule), aad), {
    code: 'ERR_CRYPTO_TAMPERED',
  });
  await t.rejects(c.wrapKey(dataKey, [], aad), { code: 'ERR_CRYPTO_MALFORMED' });
});

t.test('key files', async (t) => {
  const s = c.generateSigner();
  const r = c.generateRecipient();
  const cases: [c.KeyKind, Uint8Array][] = [
    ['signer-public', s.publicKey],
    ['signer-secret', s.secretKey],
    ['recipient-public', r.publicKey],
    ['recipient-secret', r.secretKey],
  ];
  for (const [kind, key] of cases) {
    const text = c.encodeKeyFile(kind, key);
    const pub = kind.startsWith('signer') ? s.publicKey : r.publicKey;
    t.match(text, `Fingerprint: ${c.fingerprint(pub)}`);
    t.same(c.decodeKeyFile(text), { kind, key });
    t.same(c.decodeKeyFile(`some mail text\r\n${text.replaceAll('\n', '\r\n')}\nsignature`, kind), {
      kind,
      key,
    });
  }
  t.throws(() => c.encodeKeyFile('signer-public', r.publicKey), { code: 'ERR_CRYPTO_WRONG_KIND' });
  t.throws(() => c.fingerprint(s.secretKey), { code: 'ERR_CRYPTO_WRONG_KIND' });
});
