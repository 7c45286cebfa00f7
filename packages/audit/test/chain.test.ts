// Building and verifying the chain: a clean chain verifies; each kind of tampering is reported
// with the right problem and firstBadSeq; pages verify across anchors.
import t from 'tap';
import {
  type AuditError,
  type AuditEvent,
  type AuditEventInput,
  assertChain,
  buildEvent,
  ChainVerifier,
  GENESIS_HASH,
  hashEvent,
  verifyChain,
} from '../src/index.ts';

const actor = { email: 'alice@example.com', subject: 'sub-alice', method: 'session' } as const;

function chain(n: number, start?: AuditEvent): AuditEvent[] {
  const out: AuditEvent[] = [];
  let prev: AuditEvent | null = start ?? null;
  for (let i = 0; i < n; i++) {
    const input: AuditEventInput = {
      action: 'job-upsert',
      actor,
      role: 'owner',
      sourceAddress: '192.0.2.1',
      target: `job-${i}`,
      outcome: 'applied',
      detail: { configRev: i + 1 },
    };
    prev = buildEvent(prev, input, new Date(Date.UTC(2025, 0, 1, 0, 0, i)));
    out.push(prev);
  }
  return out;
}

const clone = (events: AuditEvent[]) => structuredClone(events);

t.test('buildEvent: seq, ts, prevHash and hash', async (t) => {
  const [a, b] = chain(2);
  t.equal(a!.seq, 1);
  t.equal(a!.prevHash, GENESIS_HASH);
  t.equal(GENESIS_HASH, `sha384:${'0'.repeat(96)}`);
  t.equal(a!.ts, '2025-01-01T00:00:00.000Z');
  t.match(a!.hash, /^sha384:[0-9a-f]{96}$/);
  t.equal(a!.hash, hashEvent(a!), 'hash covers the event without its hash');
  t.equal(b!.seq, 2);
  t.equal(b!.prevHash, a!.hash, 'each prevHash is the previous hash');
  t.strictSame(Object.keys(a!).sort(), [
    'action',
    'actor',
    'approver',
    'detail',
    'hash',
    'outcome',
    'prevHash',
    'role',
    'seq',
    'sourceAddress',
    'target',
    'ts',
  ]);
  t.equal(a!.approver, null, 'absent fields are null, so every event has the same shape');
});

t.test('buildEvent refuses bad input', async (t) => {
  const ok: AuditEventInput = { action: 'run-trigger', actor, outcome: 'applied' };
  const cases: Array<[string, () => unknown, string]> = [
    [
      'unknown action',
      () => buildEvent(null, { ...ok, action: 'job-frobnicate' as never }),
      'ERR_AUDIT_UNKNOWN_ACTION',
    ],
    [
      'bad method',
      () => buildEvent(null, { ...ok, actor: { ...actor, method: 'magic' as never } }),
      'ERR_AUDIT_INVALID_EVENT',
    ],
    ['bad outcome', () => buildEvent(null, { ...ok, outcome: 'maybe' as never }), 'ERR_AUDIT_INVALID_EVENT'],
    ['bad prev', () => buildEvent({ seq: 0, hash: GENESIS_HASH }, ok), 'ERR_AUDIT_INVALID_EVENT'],
    ['bad prev hash', () => buildEvent({ seq: 1, hash: 'sha384:zz' }, ok), 'ERR_AUDIT_INVALID_EVENT'],
    ['bad now', () => buildEvent(null, ok, new Date(Number.NaN)), 'ERR_AUDIT_INVALID_EVENT'],
    ['detail array', () => buildEvent(null, { ...ok, detail: [] as never }), 'ERR_AUDIT_INVALID_EVENT'],
    ['detail NaN', () => buildEvent(null, { ...ok, detail: { n: Number.NaN } }), 'ERR_AUDIT_INVALID_EVENT'],
    ['detail Date', () => buildEvent(null, { ...ok, detail: { d: new Date() } }), 'ERR_AUDIT_INVALID_EVENT'],
    [
      'detail undefined',
      () => buildEvent(null, { ...ok, detail: { u: undefined } }),
      'ERR_AUDIT_INVALID_EVENT',
    ],
    [
      'detail too deep',
      () => buildEvent(null, { ...ok, detail: { a: { b: { c: { d: { e: { f: { g: 1 } } } } } } } }),
      'ERR_AUDIT_INVALID_EVENT',
    ],
    [
      'detail too large',
      () =>
        buildEvent(null, {
          ...ok,
          detail: { list: Array.from({ length: 400 }, (_, i) => `field-${i}-name`) },
        }),
      'ERR_AUDIT_DETAIL_TOO_LARGE',
    ],
    ['target type', () => buildEvent(null, { ...ok, target: 5 as never }), 'ERR_AUDIT_INVALID_EVENT'],
    ['role too long', () => buildEvent(null, { ...ok, role: 'r'.repeat(65) }), 'ERR_AUDIT_INVALID_EVENT'],
  ];
  t.plan(cases.length);
  for (const [name, fn, code] of cases) t.throws(fn, { code }, name);
});

t.test('a clean chain verifies', async (t) => {
  const events = chain(6);
  const r = verifyChain(events);
  t.ok(r.ok);
  if (r.ok) {
    t.equal(r.headSeq, 6);
    t.equal(r.headHash, events[5]!.hash);
    t.equal(r.count, 6);
    t.equal(r.firstSeq, 1);
  }
  t.same(
    verifyChain([]),
    { ok: true, firstSeq: null, headSeq: 0, headHash: GENESIS_HASH, count: 0 },
    'empty chain is genesis',
  );
  t.ok(verifyChain(events, { expectedHead: { seq: 6, hash: events[5]!.hash } }).ok);
  t.doesNotThrow(() => assertChain(r));
});

t.test('tampering is reported at the right seq', async (t) => {
  const base = chain(6);
  const expectBad = (events: unknown[], problem: string, firstBadSeq: number, name: string) => {
    const r = verifyChain(events);
    t.equal(r.ok, false, `${name}: fails`);
    if (!r.ok) {
      t.equal(r.problem, problem, `${name}: problem`);
      t.equal(r.firstBadSeq, firstBadSeq, `${name}: firstBadSeq`);
      t.notMatch(r.message, 'job-', `${name}: message carries no event content`);
    }
  };

  const edited = clone(base);
  edited[2]!.detail = { configRev: 99 };
  expectBad(edited, 'hash-mismatch', 3, 'edit one detail');

  const editedActor = clone(base);
  editedActor[3]!.actor.email = 'mallory@example.com';
  expectBad(editedActor, 'hash-mismatch', 4, 'edit one actor');

  expectBad([...base.slice(0, 2), ...base.slice(3)], 'seq-gap', 3, 'drop one');
  expectBad(base.slice(1), 'seq-gap', 1, 'drop the first');

  const swapped = clone(base);
  [swapped[2], swapped[3]] = [swapped[3]!, swapped[2]!];
  expectBad(swapped, 'seq-gap', 3, 'reorder two');

  expectBad([...base.slice(0, 3), base[2]!, ...base.slice(3)], 'seq-order', 4, 'duplicate one');

  const prevChanged = clone(base);
  prevChanged[4]!.prevHash = base[1]!.hash;
  expectBad(prevChanged, 'prev-mismatch', 5, 'change a prevHash');

  // A careful attacker edits event 3 and recomputes its hash: the break shows at 4.
  const rehashed = clone(base);
  rehashed[2]!.detail = { configRev: 99 };
  rehashed[2]!.hash = hashEvent(rehashed[2]!);
  expectBad(rehashed, 'prev-mismatch', 4, 'edit and rehash one');

  const renumbered = clone(base);
  renumbered[1]!.seq = 7;
  expectBad(renumbered, 'seq-gap', 2, 'renumber one');

  const firstPrev = clone(base);
  firstPrev[0]!.prevHash = `sha384:${'1'.repeat(96)}`;
  firstPrev[0]!.hash = hashEvent(firstPrev[0]!);
  expectBad(firstPrev, 'prev-mismatch', 1, 'first event not on genesis');

  const malformed = clone(base) as unknown[];
  malformed[1] = { ...(malformed[1] as object), hash: 'md5:abc' };
  expectBad(malformed, 'malformed', 2, 'malformed hash');
  expectBad([base[0], 'not an event'], 'malformed', 2, 'not an object');
  const badTs = clone(base);
  badTs[0]!.ts = 'yesterday';
  expectBad(badTs, 'malformed', 1, 'bad ts');
  const extra = clone(base) as Array<AuditEvent & { injected?: string }>;
  extra[5]!.injected = 'x';
  expectBad(extra, 'hash-mismatch', 6, 'an added member counts');

  const r = verifyChain(edited);
  t.throws(() => assertChain(r), { code: 'ERR_AUDIT_CHAIN_BROKEN', firstBadSeq: 3 });
  if (!r.ok) {
    t.same(r.lastGood, { seq: 2, hash: base[1]!.hash }, 'lastGood is the last verified position');
    t.equal(r.index, 2);
    t.equal(r.count, 2);
  }
});

t.test('expected head: truncation and divergence', async (t) => {
  const base = chain(5);
  const head = { seq: 5, hash: base[4]!.hash };
  const cut = verifyChain(base.slice(0, 3), { expectedHead: head });
  t.match(cut, { ok: false, problem: 'truncated', firstBadSeq: 4, index: 3 });
  const past = verifyChain(base, { expectedHead: { seq: 4, hash: base[3]!.hash } });
  t.match(past, { ok: false, problem: 'head-mismatch', firstBadSeq: 5 });
  const other = verifyChain(base, { expectedHead: { seq: 5, hash: base[3]!.hash } });
  t.match(other, { ok: false, problem: 'head-mismatch', firstBadSeq: 5 });
  t.match(verifyChain([], { expectedHead: head }), { ok: false, problem: 'truncated', firstBadSeq: 1 });
  t.throws(() => verifyChain(base, { expectedHead: { seq: 5, hash: 'nope' } }), {
    code: 'ERR_AUDIT_MALFORMED_DOCUMENT',
  });
});

t.test('cross-page verification with anchors', async (t) => {
  const all = chain(10);
  const pages = [all.slice(0, 4), all.slice(4, 7), all.slice(7)];
  let anchor: { seq: number; hash: string } | undefined;
  for (const page of pages) {
    const r = verifyChain(page, anchor === undefined ? {} : { anchor });
    t.ok(r.ok, `page ending ${page.at(-1)!.seq} verifies from its anchor`);
    if (r.ok) anchor = { seq: r.headSeq, hash: r.headHash };
  }
  t.same(anchor, { seq: 10, hash: all[9]!.hash });

  t.match(
    verifyChain(pages[1]!),
    { ok: false, problem: 'seq-gap', firstBadSeq: 1 },
    'a later page is not genesis',
  );
  t.match(verifyChain(pages[2]!, { anchor: { seq: 4, hash: all[3]!.hash } }), {
    ok: false,
    problem: 'seq-gap',
    firstBadSeq: 5,
  });
  t.match(verifyChain(pages[1]!, { anchor: { seq: 4, hash: all[2]!.hash } }), {
    ok: false,
    problem: 'prev-mismatch',
    firstBadSeq: 5,
  });
  // A chain rewritten from seq 5 on, consistently, verifies on its own...
  const forged = chain(6, all[3]);
  forged[0]!.detail = { configRev: 1000 };
  let prev: AuditEvent = all[3]!;
  const rewritten = forged.map((e) => {
    const next = { ...e, prevHash: prev.hash };
    next.hash = hashEvent(next);
    prev = next;
    return next;
  });
  t.ok(verifyChain([...all.slice(0, 4), ...rewritten]).ok, 'a consistent rewrite verifies without a head');
  // ...but not against a head the consumer kept from before the rewrite.
  t.match(
    verifyChain(rewritten, {
      anchor: { seq: 4, hash: all[3]!.hash },
      expectedHead: { seq: 10, hash: all[9]!.hash },
    }),
    {
      ok: false,
      problem: 'head-mismatch',
      firstBadSeq: 10,
    },
  );

  const unanchored = verifyChain(all.slice(5), { anchor: null });
  t.match(unanchored, { ok: true, firstSeq: 6, headSeq: 10, count: 5 }, 'anchor null accepts a pruned start');
  t.throws(() => verifyChain(all, { anchor: { seq: 0, hash: all[0]!.hash } }), {
    code: 'ERR_AUDIT_MALFORMED_DOCUMENT',
  });
  t.throws(() => verifyChain(all, { anchor: { seq: -1, hash: GENESIS_HASH } }), {
    code: 'ERR_AUDIT_MALFORMED_DOCUMENT',
  });
});

t.test('ChainVerifier works incrementally and stops at the first failure', async (t) => {
  const all = chain(5);
  const v = new ChainVerifier();
  t.ok(v.push(all[0]));
  t.ok(v.pushAll(all.slice(1, 3)));
  t.notOk(v.push(all[4]), 'gap');
  t.notOk(v.push(all[3]), 'later pushes are ignored once failed');
  t.match(v.finish(), { ok: false, problem: 'seq-gap', firstBadSeq: 4 });
  t.equal(v.failure?.firstBadSeq, 4);
  const err = (() => {
    try {
      assertChain(v.finish());
    } catch (e) {
      return e as AuditError;
    }
  })();
  t.equal(err?.code, 'ERR_AUDIT_CHAIN_BROKEN');
});
