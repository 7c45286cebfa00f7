// The golden chain (test/vectors/chain-v1.json): frozen events with fixed timestamps. Rebuilding
// them must give the same bytes and hashes, and a hash computed independently (node:crypto over
// sorted-key JSON, which equals RFC 8785 for these ASCII-and-BMP strings and small integers) must
// agree. A failure here means the hash definition changed: that is a format break.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import {
  type AuditEvent,
  type AuditEventInput,
  buildEvent,
  GENESIS_HASH,
  hashEvent,
  verifyChain,
} from '../src/index.ts';

interface Vector {
  genesis: string;
  firstEventCanonical: string;
  steps: Array<{ now: string; input: AuditEventInput }>;
  events: AuditEvent[];
  head: { seq: number; hash: string };
}

const vector = JSON.parse(
  readFileSync(fileURLToPath(new URL('./vectors/chain-v1.json', import.meta.url)), 'utf8'),
) as Vector;

/** Sorted-key JSON: a second, independent implementation of the canonical form for these values. */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${sortedJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

t.test('the golden chain verifies and its head is frozen', async (t) => {
  t.equal(vector.genesis, GENESIS_HASH);
  t.equal(vector.events.length, 5);
  t.same(verifyChain(vector.events, { expectedHead: vector.head }), {
    ok: true,
    firstSeq: 1,
    headSeq: 5,
    headHash: vector.head.hash,
    count: 5,
  });
  t.equal(
    vector.head.hash,
    'sha384:e6ad1d49a1feb5b372d5e9eaed721fe766e1b31026d89bf07a27bd2b585cd7983e53917b22ba45adcb1b23d9db24e18d',
    'head hash is pinned in the test too, not only in the vector file',
  );
});

t.test('rebuilding from the inputs gives the same events, byte for byte', async (t) => {
  let prev: AuditEvent | null = null;
  vector.steps.forEach((step, i) => {
    prev = buildEvent(prev, step.input, new Date(step.now));
    t.same(prev, vector.events[i], `event ${i + 1}`);
  });
});

t.test('an independent SHA-384 over the canonical text agrees', async (t) => {
  const { hash: _h, ...first } = vector.events[0]!;
  t.equal(sortedJson(first), vector.firstEventCanonical, 'canonical text of event 1');
  for (const e of vector.events) {
    const { hash, ...rest } = e;
    const independent = `sha384:${createHash('sha384').update(sortedJson(rest), 'utf8').digest('hex')}`;
    t.equal(independent, hash, `event ${e.seq}`);
    t.equal(hashEvent(e), hash);
  }
});
