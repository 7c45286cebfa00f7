// Plants a marker secret in every input that can carry secret bytes (keys, plaintexts, aad,
// contexts, key-file text, JSON values), drives every error path of the public API, and checks
// that the marker appears in no message, stack, or serialised error, in any encoding.
import t from 'tap';
import * as browser from '../src/browser.ts';
import * as c from '../src/index.ts';

const MARKER = 'MARKER-SECRET-9d41c7';
const markerBytes = new TextEncoder().encode(MARKER);
const forms = [
  MARKER,
  Buffer.from(markerBytes).toString('hex'),
  Buffer.from(markerBytes).toString('base64').replace(/=+$/, ''),
  Buffer.from(markerBytes).toString('base64url'),
  Array.from(markerBytes).join(','),
];

/** Bytes of `length` that are the marker repeated, with the given leading header bytes. */
function planted(length: number, ...header: number[]): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = markerBytes[i % markerBytes.length]!;
  out.set(header);
  return out;
}

const errors: unknown[] = [];
async function collect(f: () => unknown): Promise<void> {
  try {
    await f();
    errors.push(new Error('no error'));
  } catch (e) {
    errors.push(e);
  }
}

t.test('no error message carries the marker secret', async (t) => {
  const s = c.generateSigner();
  const r = c.generateRecipient();
  const capsule = await c.seal(r.publicKey, markerBytes, markerBytes);
  for (const api of [c, browser]) {
    // Keys built from marker bytes: bad version, unknown kind, wrong length, wrong kind.
    for (const key of [
      planted(66),
      planted(66, 1, 9),
      planted(65, 1, 2),
      planted(34, 1, 4),
      planted(2626, 1, 1),
    ]) {
      await collect(() => api.sign(key, markerBytes, MARKER));
      await collect(() => api.verify(key, markerBytes, planted(4692, 1), MARKER));
      await collect(() => api.seal(key, markerBytes, markerBytes));
      await collect(() => api.open(key, capsule, markerBytes));
      await collect(() => api.fingerprint(key));
      await collect(() => api.encodeKeyFile('signer-secret', key));
      await collect(() => api.unwrapKey(key, [], markerBytes));
      await collect(() => api.signerPublicKeyFromSecret(key));
      await collect(() => api.recipientPublicKeyFromSecret(key));
    }
    // Valid keys, bad data.
    await collect(() => api.sign(s.secretKey, markerBytes, `${MARKER}\ud800`));
    await collect(() => api.assertSignature(s.publicKey, markerBytes, planted(4692, 1), MARKER));
    await collect(() => api.open(r.secretKey, capsule, planted(20)));
    await collect(() => api.open(c.generateRecipient().secretKey, capsule, markerBytes));
    await collect(() => api.open(r.secretKey, planted(2000, 1), markerBytes));
    await collect(() => api.open(r.secretKey, planted(2000, 7), markerBytes));
    await collect(() => api.open(r.secretKey, planted(100, 1), markerBytes));
    await collect(() =>
      api.unwrapKey(
        r.secretKey,
        [{ recipient: c.fingerprint(r.publicKey), capsule: `${MARKER}*` }],
        markerBytes,
      ),
    );
    await collect(() =>
      api.unwrapKey(r.secretKey, [{ recipient: MARKER as c.Digest, capsule: MARKER }], markerBytes),
    );
    await collect(() => api.wrapKey(markerBytes, [], markerBytes));
    await collect(() => api.aeadEncrypt(planted(31), planted(12), markerBytes, markerBytes));
    await collect(() => api.aeadEncrypt(planted(32), planted(11), markerBytes, markerBytes));
    await collect(() => api.aeadDecrypt(planted(32), planted(12), planted(64), markerBytes));
    await collect(() => api.aeadDecrypt(planted(32), planted(12), planted(10), markerBytes));
    await collect(() => api.parseDigest(`sha384:${MARKER}`));
    await collect(() => api.fromHex(MARKER));
    await collect(() => api.fromBase64Url(`${MARKER}!`));
    await collect(() => api.formatDigest(markerBytes));
    await collect(() => api.canonicalJson({ secret: MARKER, bad: 1n }));
    await collect(() => api.canonicalJson({ secret: MARKER, bad: `${MARKER}\ud800` }));
    await collect(() => api.canonicalJson(() => MARKER));
    const cyclic: Record<string, unknown> = { secret: MARKER };
    cyclic.self = cyclic;
    await collect(() => api.canonicalJson(cyclic));
    await collect(() => api.randomBytes(-1));
    const h = api.createSha384();
    h.update(markerBytes).digest();
    await collect(() => h.update(markerBytes));
    // Key files with the marker in headers and body.
    const text = c.encodeKeyFile('recipient-secret', r.secretKey);
    await collect(() => api.decodeKeyFile(MARKER));
    await collect(() => api.decodeKeyFile(text.replace('Version: 1', `Version: ${MARKER}`)));
    await collect(() => api.decodeKeyFile(text.replace(/Fingerprint: .*/, `Fingerprint: ${MARKER}`)));
    await collect(() => api.decodeKeyFile(text.replace('Version: 1', `X-${MARKER} ${MARKER}`)));
    await collect(() =>
      api.decodeKeyFile(
        text.replace(/\n\n.*\n/, `\n\n${Buffer.from(planted(34, 1, 4)).toString('base64')}\n`),
      ),
    );
    await collect(() => api.decodeKeyFile(text.replace(/\n\n.*\n/, `\n\n${MARKER}\n`)));
    await collect(() => api.decodeKeyFile(text, 'signer-public'));
  }
  let leaks = 0;
  let nonCrypto = 0;
  for (const e of errors) {
    if (!(e instanceof c.CryptoError)) {
      if (!(e instanceof Error && e.message === 'no error')) nonCrypto++;
      continue;
    }
    const text = [
      e.message,
      String(e),
      e.stack ?? '',
      JSON.stringify(e),
      JSON.stringify(Object.entries(e)),
    ].join('\n');
    for (const f of forms) if (text.includes(f)) leaks++;
  }
  t.ok(errors.length > 80, `${errors.length} error paths driven`);
  t.equal(nonCrypto, 0, 'every failure is a CryptoError');
  t.equal(leaks, 0, 'no message carries the marker in any encoding');
});
