// Key encodings and armoured key files: round trips, tolerance for mail/CRLF, and refusal of
// every kind of damage (a changed character, a wrong header, a wrong kind, an unknown version).
import t from 'tap';
import * as c from '../src/index.ts';
import { KEY_LENGTHS } from '../src/internal/key-encoding.ts';

const s = c.generateSigner();
const r = c.generateRecipient();
const keys = {
  'signer-public': s.publicKey,
  'signer-secret': s.secretKey,
  'recipient-public': r.publicKey,
  'recipient-secret': r.secretKey,
} as const;

t.test('encoded lengths are the documented ones', async (t) => {
  t.same(KEY_LENGTHS, {
    'signer-public': 2626,
    'signer-secret': 66,
    'recipient-public': 1602,
    'recipient-secret': 34,
  });
  for (const [kind, key] of Object.entries(keys)) t.equal(key.length, KEY_LENGTHS[kind as c.KeyKind], kind);
  t.equal(c.SIGNATURE_BYTES, 4692);
  t.equal(c.CAPSULE_MIN_BYTES, 1665);
});

t.test('every kind round-trips and names itself', async (t) => {
  for (const [kind, key] of Object.entries(keys) as [c.KeyKind, Uint8Array][]) {
    const text = c.encodeKeyFile(kind, key);
    t.match(
      text,
      new RegExp(
        `^-----BEGIN COFFER ${kind.replace('-', ' ').toUpperCase()} KEY-----\nVersion: 1\nFingerprint: sha384:[0-9a-f]{96}\n\n`,
      ),
    );
    t.ok(
      text.split('\n').every((l) => l.length <= 64 || l.startsWith('Fingerprint') || l.startsWith('-----')),
    );
    t.same(c.decodeKeyFile(text, kind), { kind, key });
    for (const otherKind of Object.keys(keys) as c.KeyKind[]) {
      if (otherKind !== kind)
        t.throws(() => c.decodeKeyFile(text, otherKind), { code: 'ERR_CRYPTO_WRONG_KIND' });
    }
  }
  const pubText = c.encodeKeyFile('signer-public', s.publicKey);
  t.same(
    c.decodeKeyFile(`  ${pubText.replaceAll('\n', '\r\n')}  `).key,
    s.publicKey,
    'CRLF and outer spaces',
  );
  t.same(
    c.decodeKeyFile(pubText.replace('Version: 1\n', 'Version: 1\nComment: laptop key\n')).key,
    s.publicKey,
    'extra header',
  );
});

t.test('damaged key files are refused', async (t) => {
  const text = c.encodeKeyFile('recipient-secret', r.secretKey);
  const lines = text.split('\n');
  // Every character of the base64 body changed in turn: the fingerprint check (or base64) catches it.
  const bodyStart = lines.indexOf('') + 1;
  let accepted = 0;
  let tried = 0;
  for (let li = bodyStart; li < lines.length - 2; li++) {
    const line = lines[li]!;
    for (let ci = 0; ci < line.length; ci++) {
      if (line[ci] === '=') continue;
      const swapped = line[ci] === 'A' ? 'B' : 'A';
      const damaged = [...lines];
      damaged[li] = line.slice(0, ci) + swapped + line.slice(ci + 1);
      tried++;
      try {
        c.decodeKeyFile(damaged.join('\n'));
        accepted++;
      } catch (e) {
        if ((e as c.CryptoError).code === undefined) accepted += 1000;
      }
    }
  }
  t.equal(accepted, 0, `all ${tried} single-character changes refused`);

  const cases: [string, string, string][] = [
    ['', 'ERR_CRYPTO_MALFORMED', 'empty'],
    [text.replace('-----END COFFER RECIPIENT SECRET KEY-----', ''), 'ERR_CRYPTO_MALFORMED', 'no END'],
    [text.replace('RECIPIENT SECRET', 'RECIPIENT PRIVATE'), 'ERR_CRYPTO_MALFORMED', 'unknown label'],
    [text.replace('Version: 1', 'Version: 2'), 'ERR_CRYPTO_UNSUPPORTED_VERSION', 'Version 2'],
    [text.replace('Version: 1\n', ''), 'ERR_CRYPTO_MALFORMED', 'no Version'],
    [text.replace(/Fingerprint: .*\n/, ''), 'ERR_CRYPTO_MALFORMED', 'no Fingerprint'],
    [
      text.replace(/Fingerprint: sha384:./, 'Fingerprint: sha384:x'),
      'ERR_CRYPTO_MALFORMED',
      'bad Fingerprint',
    ],
    [text.replace('Version: 1', 'Version: 1\nVersion: 1'), 'ERR_CRYPTO_MALFORMED', 'repeated header'],
    [text.replace('Version: 1', 'Version 1'), 'ERR_CRYPTO_MALFORMED', 'header without colon'],
    [lines.slice(0, bodyStart).concat(lines.slice(-2)).join('\n'), 'ERR_CRYPTO_MALFORMED', 'no body'],
    [
      text
        .replace('RECIPIENT SECRET KEY-----\n', 'RECIPIENT PUBLIC KEY-----\n')
        .replace('END COFFER RECIPIENT SECRET', 'END COFFER RECIPIENT PUBLIC'),
      'ERR_CRYPTO_MALFORMED',
      'label says public, data is secret',
    ],
  ];
  for (const [input, code, name] of cases) t.throws(() => c.decodeKeyFile(input), { code }, name);
  t.throws(() => c.decodeKeyFile(42 as unknown as string), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.decodeKeyFile(text, 'nonsense' as c.KeyKind), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.encodeKeyFile('nonsense' as c.KeyKind, r.secretKey), { code: 'ERR_CRYPTO_MALFORMED' });
  t.throws(() => c.encodeKeyFile('recipient-public', r.secretKey), { code: 'ERR_CRYPTO_WRONG_KIND' });
  // A binary key whose version byte is unknown, armoured by hand.
  const v2 = r.secretKey.slice();
  v2[0] = 2;
  const forged = text.replace(/\n\n[\s\S]*\n-----END/, `\n\n${Buffer.from(v2).toString('base64')}\n-----END`);
  t.throws(() => c.decodeKeyFile(forged), { code: 'ERR_CRYPTO_UNSUPPORTED_VERSION' });
});

t.test('fingerprints', async (t) => {
  t.match(c.fingerprint(s.publicKey), /^sha384:[0-9a-f]{96}$/);
  t.equal(c.fingerprint(s.publicKey), c.sha384Digest(s.publicKey), 'SHA-384 of the whole encoding');
  t.not(c.fingerprint(s.publicKey), c.fingerprint(r.publicKey));
  t.throws(() => c.fingerprint(r.secretKey), { code: 'ERR_CRYPTO_WRONG_KIND' });
  t.throws(() => c.fingerprint(s.publicKey.subarray(0, 3)), { code: 'ERR_CRYPTO_MALFORMED' });
  t.ok(c.isDigest(c.fingerprint(r.publicKey)));
});
