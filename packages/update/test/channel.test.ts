// Channel documents: signature by the pinned signer (both halves), expiry, sequence, schema.
import { fingerprint, fromBase64Url, toBase64Url } from '@coffer/crypto';
import t from 'tap';
import { makeDoc, NOW, otherSigner, signed, signer, trust } from './helpers/channel.ts';
import {
  encodeTrustFixture,
  isUpdateError,
  parseChannelDocument,
  trustFromKeyFile,
  verifyChannel,
} from './helpers/exports.ts';

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return isUpdateError(e) ? e.code : `not an UpdateError: ${(e as Error).message}`;
  }
};

function envelope(bytes: Uint8Array): { signed: Record<string, unknown>; signer: string; signature: string } {
  return JSON.parse(new TextDecoder().decode(bytes));
}
const encode = (x: unknown) => new TextEncoder().encode(JSON.stringify(x));

t.test('a signed document verifies and names its digest', async (t) => {
  const v = verifyChannel(signed(makeDoc()), { trust, now: NOW, source: 'here' });
  t.equal(v.document.sequence, 7);
  t.equal(v.signer, fingerprint(signer.publicKey));
  t.match(v.digest, /^sha384:[0-9a-f]{96}$/);
  t.equal(v.source, 'here');
  // Whitespace in transit does not matter: the signature covers the canonical JSON.
  const again = verifyChannel(encode(envelope(signed(makeDoc()))), { trust, now: NOW });
  t.equal(again.digest, v.digest);
});

t.test('wrong signer, broken halves and a tampered field are refused', async (t) => {
  const good = signed(makeDoc());
  t.equal(
    code(() => verifyChannel(signed(makeDoc(), otherSigner.secretKey), { trust, now: NOW })),
    'ERR_UPDATE_WRONG_SIGNER',
    'signed by another key',
  );
  const forgedSigner = envelope(signed(makeDoc(), otherSigner.secretKey));
  forgedSigner.signer = fingerprint(signer.publicKey);
  t.equal(
    code(() => verifyChannel(encode(forgedSigner), { trust, now: NOW })),
    'ERR_UPDATE_BAD_SIGNATURE',
    'another key claiming the pinned fingerprint',
  );
  // Layout: 0x01 || Ed25519 (64) || ML-DSA-87 (4627).
  for (const [half, at] of [
    ['Ed25519', 1 + 10],
    ['ML-DSA-87', 1 + 64 + 100],
  ] as const) {
    const e = envelope(good);
    const sig = fromBase64Url(e.signature);
    sig[at] = sig[at]! ^ 0x01;
    e.signature = toBase64Url(sig);
    t.equal(
      code(() => verifyChannel(encode(e), { trust, now: NOW })),
      'ERR_UPDATE_BAD_SIGNATURE',
      `${half} half broken`,
    );
  }
  const tampered = envelope(good);
  (tampered.signed.recommended as Record<string, unknown>).version = '9.9.9';
  t.equal(
    code(() => verifyChannel(encode(tampered), { trust, now: NOW })),
    'ERR_UPDATE_BAD_SIGNATURE',
    'field changed',
  );
  t.equal(
    code(() => verifyChannel(new TextEncoder().encode('{'), { trust, now: NOW })),
    'ERR_UPDATE_MALFORMED_CHANNEL',
  );
  t.equal(
    code(() =>
      verifyChannel(good, { trust: { publicKey: signer.publicKey, fingerprint: 'sha384:00' }, now: NOW }),
    ),
    'ERR_UPDATE_TRUST_CONFIG',
    'pinned fingerprint does not match the pinned key',
  );
});

t.test('expiry, issue time and clock skew', async (t) => {
  const doc = signed(makeDoc({ issuedAt: '2026-05-01T00:00:00Z', expiresAt: '2026-05-02T00:00:00Z' }));
  const at = (iso: string, skew?: number) =>
    code(() =>
      verifyChannel(doc, {
        trust,
        now: Date.parse(iso),
        ...(skew !== undefined ? { maxClockSkewMs: skew } : {}),
      }),
    );
  t.equal(at('2026-05-01T12:00:00Z'), undefined, 'valid in the middle');
  t.equal(at('2026-05-02T00:04:59Z'), undefined, 'within the default 5 min skew after expiry');
  t.equal(at('2026-05-02T00:05:00Z'), 'ERR_UPDATE_EXPIRED', 'expired beyond the skew (freeze attack)');
  t.equal(at('2026-05-02T00:00:01Z', 0), 'ERR_UPDATE_EXPIRED', 'no skew');
  t.equal(at('2026-04-30T23:56:00Z'), undefined, 'issued slightly in the future is tolerated');
  t.equal(at('2026-04-30T23:54:00Z'), 'ERR_UPDATE_NOT_YET_VALID', 'issued in the future');
  t.equal(at('2026-05-03T00:00:00Z', 10 * 86_400_000), 'ERR_UPDATE_EXPIRED', 'skew capped at one hour');
});

t.test('the sequence never goes backwards', async (t) => {
  const seven = signed(makeDoc({ sequence: 7 }));
  const first = verifyChannel(seven, { trust, now: NOW });
  t.equal(
    code(() => verifyChannel(seven, { trust, now: NOW, lastSequence: 8 })),
    'ERR_UPDATE_SEQUENCE_ROLLBACK',
    'lowered',
  );
  t.equal(
    code(() => verifyChannel(seven, { trust, now: NOW, lastSequence: 7, lastDigest: first.digest })),
    undefined,
    'same',
  );
  t.equal(
    code(() => verifyChannel(seven, { trust, now: NOW, lastSequence: 6 })),
    undefined,
    'raised',
  );
  const other = signed(makeDoc({ sequence: 7, version: '1.4.1' }));
  t.equal(
    code(() => verifyChannel(other, { trust, now: NOW, lastSequence: 7, lastDigest: first.digest })),
    'ERR_UPDATE_SEQUENCE_ROLLBACK',
    'same sequence, other document',
  );
  t.equal(
    code(() => verifyChannel(seven, { trust, now: NOW, channel: 'beta' })),
    'ERR_UPDATE_MALFORMED_CHANNEL',
    'channel name',
  );
});

t.test('schema rules', async (t) => {
  // Loosely typed on purpose: each case breaks the document's type.
  // biome-ignore lint/suspicious/noExplicitAny: fixtures that break the document's type
  type Loose = Record<string, any>;
  const cases: [string, (d: Loose) => void][] = [
    ['unknown top-level field', (d) => (d.extra = 1)],
    ['wrong kind', (d) => (d.kind = 'other')],
    ['version 2', (d) => (d.v = 2)],
    ['sequence 0', (d) => (d.sequence = 0)],
    ['sequence not integer', (d) => (d.sequence = 1.5)],
    ['bad time', (d) => (d.issuedAt = '2026-05-01')],
    ['expiry before issue', (d) => (d.expiresAt = '2026-04-01T00:00:00Z')],
    ['bad risk', (d) => (d.recommended.risk = 'yolo')],
    ['v-prefixed version', (d) => (d.recommended.version = 'v1.4.0')],
    ['steps not strings', (d) => (d.recommended.requiredSteps = [1])],
    ['negative epoch', (d) => (d.recommended.schemaEpoch = -1)],
    ['migration not boolean', (d) => (d.recommended.migration = 'no')],
    ['engine version differs', (d) => (d.components.engine.version = '1.3.0')],
    ['minEngineVersion above release', (d) => (d.recommended.minEngineVersion = '2.0.0')],
    ['unknown component', (d) => (d.components.agent = d.components.engine)],
    ['no engine', (d) => delete d.components.engine],
    ['bad digest', (d) => (d.components.engine.sha384 = 'sha256:00')],
    ['zero size', (d) => (d.components.engine.size = 0)],
    ['http url', (d) => (d.components.engine.url = 'http://example.org/e.tgz')],
    ['url with credentials', (d) => (d.components.engine.url = 'https://u:p@example.org/e.tgz')],
    ['dot-dot url', (d) => (d.components.engine.url = '../e.tgz')],
    ['absolute path url', (d) => (d.components.engine.url = '/etc/passwd')],
  ];
  t.plan(cases.length + 2);
  for (const [name, mutate] of cases) {
    const d = structuredClone(makeDoc()) as Loose;
    mutate(d);
    t.equal(
      code(() => parseChannelDocument(d)),
      'ERR_UPDATE_MALFORMED_CHANNEL',
      name,
    );
  }
  t.equal(
    code(() => parseChannelDocument(makeDoc({ recommended: { minEngineVersion: '1.0.0' } }))),
    undefined,
  );
  t.equal(
    code(() => signed(structuredClone({ ...makeDoc(), sequence: -1 }))),
    'ERR_UPDATE_MALFORMED_CHANNEL',
    'signing checks too',
  );
});

t.test('trust from a key file, with a pin', async (t) => {
  const { text, fp } = encodeTrustFixture(signer.publicKey);
  t.equal(trustFromKeyFile(text, fp).fingerprint, fp);
  t.equal(
    code(() => trustFromKeyFile(text, fingerprint(otherSigner.publicKey))),
    'ERR_UPDATE_TRUST_CONFIG',
  );
  t.equal(
    code(() => trustFromKeyFile('nonsense')),
    'ERR_UPDATE_TRUST_CONFIG',
  );
});
