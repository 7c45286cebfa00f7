// Feed pages: every query-parameter rule of the specification's table, the page fields
// (gapBefore, nextAfterSeq, head), and a consumer that polls with afterSeq = nextAfterSeq and
// verifies every prevHash until the last hash equals headHash.
import t from 'tap';
import {
  AFTER_SEQ_ERROR,
  type AuditAfterSeqError,
  type AuditAnchor,
  type AuditEvent,
  type AuditFeedPage,
  buildEvent,
  buildFeedPage,
  createAuditLog,
  createMemoryAuditStore,
  GENESIS_HASH,
  hashEvent,
  parseFeedQuery,
  verifyFeedPage,
} from '../src/index.ts';

const actor = { email: null, subject: null, method: 'engine' } as const;

function chain(n: number): AuditEvent[] {
  const out: AuditEvent[] = [];
  let prev: AuditEvent | null = null;
  for (let i = 0; i < n; i++) {
    prev = buildEvent(prev, {
      action: 'engine-version-change',
      actor,
      outcome: 'observed',
      detail: { to: `0.3.${i}` },
    });
    out.push(prev);
  }
  return out;
}

t.test('afterSeq rules', async (t) => {
  const after = (v: string | number | null | undefined) => parseFeedQuery({ afterSeq: v }).afterSeq;
  t.equal(after(undefined), 0, 'absent is 0');
  t.equal(after(null), 0, 'null (URLSearchParams.get of an absent name) is 0');
  t.equal(after(''), 0, 'empty is 0');
  t.equal(after('0'), 0);
  t.equal(after('17'), 17);
  t.equal(after(17), 17, 'a number from a typed caller');
  t.equal(after('2.9'), 2, 'fractions floored');
  t.equal(after('0.5'), 0);
  t.equal(after('1e3'), 1000, 'exponent notation is a number');
  t.equal(after(' 7 '), 7, 'surrounding whitespace, as Number() reads it');
  t.equal(after('0x10'), 16, 'hex, as Number() reads it (documented)');
  t.equal(after('-0'), 0, '-0 is not negative');
  t.equal(Object.is(after('-0'), -0), false, 'and reads as +0');
  t.equal(after('1e300'), 1e300, 'huge but finite is accepted (the page is empty)');
  for (const bad of [
    '-1',
    '-0.5',
    'abc',
    'NaN',
    'Infinity',
    '-Infinity',
    '1e400',
    '5abc',
    '1,2',
    Number.NaN,
    -3,
  ]) {
    const err = t.throws(
      () => after(bad),
      { code: 'ERR_AUDIT_BAD_AFTER_SEQ' },
      `refuses ${String(bad)}`,
    ) as AuditAfterSeqError;
    t.equal(err.message, 'afterSeq must be a non-negative integer');
    t.same(err.body, { error: 'afterSeq must be a non-negative integer' }, 'the exact 400 body');
  }
  t.equal(AFTER_SEQ_ERROR, 'afterSeq must be a non-negative integer');
  t.equal(
    parseFeedQuery(new URLSearchParams('afterSeq=5&afterSeq=9')).afterSeq,
    5,
    'URLSearchParams: first value',
  );
  t.same(parseFeedQuery(new URLSearchParams('')), { afterSeq: 0, limit: 500 });
});

t.test('limit rules (lenient clamp, never an error)', async (t) => {
  const limit = (v: string | number | null | undefined) => parseFeedQuery({ limit: v }).limit;
  t.equal(limit(undefined), 500, 'default 500');
  t.equal(limit(null), 500);
  t.equal(limit(''), 500);
  t.equal(limit('abc'), 500, 'non-numeric falls back to the default');
  t.equal(limit('NaN'), 500);
  t.equal(limit('1'), 1);
  t.equal(limit('250'), 250);
  t.equal(limit('1000'), 1000);
  t.equal(limit('1001'), 1000, 'clamped to 1000');
  t.equal(limit('99999999'), 1000);
  t.equal(limit('Infinity'), 1000);
  t.equal(limit('0'), 1, 'clamped to 1');
  t.equal(limit('-5'), 1);
  t.equal(limit('-Infinity'), 1);
  t.equal(limit('0.5'), 1, 'floored then clamped');
  t.equal(limit('10.9'), 10, 'floored');
  t.equal(limit(2000), 1000);
  t.equal(parseFeedQuery(new URLSearchParams('limit=20')).limit, 20);
});

t.test('buildFeedPage: fields, nextAfterSeq and gapBefore', async (t) => {
  const events = chain(10);
  const head = { headSeq: 10, headHash: events[9]!.hash };
  const page = buildFeedPage(events, { afterSeq: 3, limit: 4, earliestSeq: 1, ...head });
  t.same(Object.keys(page), [
    'kind',
    'v',
    'afterSeq',
    'nextAfterSeq',
    'earliestSeq',
    'gapBefore',
    'headSeq',
    'headHash',
    'count',
    'events',
  ]);
  t.match(page, {
    kind: 'engine-audit-feed',
    v: 1,
    afterSeq: 3,
    nextAfterSeq: 7,
    earliestSeq: 1,
    gapBefore: false,
    count: 4,
  });
  t.same(
    page.events.map((e) => e.seq),
    [4, 5, 6, 7],
    'seq strictly greater than afterSeq, oldest first',
  );
  t.same(
    buildFeedPage([...events].reverse(), { afterSeq: 3, limit: 4, earliestSeq: 1, ...head }).events.map(
      (e) => e.seq,
    ),
    [4, 5, 6, 7],
    'input order does not matter',
  );

  const empty = buildFeedPage(events, { afterSeq: 10, limit: 500, earliestSeq: 1, ...head });
  t.match(empty, { count: 0, nextAfterSeq: 10, events: [] }, 'count 0: nextAfterSeq = afterSeq');
  const beyond = buildFeedPage(events, { afterSeq: 1e300, limit: 500, earliestSeq: 1, ...head });
  t.match(beyond, { count: 0, nextAfterSeq: 1e300 }, 'afterSeq past the head: nextAfterSeq = afterSeq');

  const pruned = events.slice(5);
  t.match(buildFeedPage(pruned, { afterSeq: 0, limit: 500, earliestSeq: 6, ...head }), {
    gapBefore: true,
    nextAfterSeq: 10,
    count: 5,
  });
  t.match(buildFeedPage(pruned, { afterSeq: 4, limit: 500, earliestSeq: 6, ...head }), { gapBefore: true });
  t.match(
    buildFeedPage(pruned, { afterSeq: 5, limit: 500, earliestSeq: 6, ...head }),
    { gapBefore: false },
    'afterSeq + 1 = earliestSeq is no gap',
  );
  t.match(
    buildFeedPage([], { afterSeq: 0, limit: 500, earliestSeq: null, headSeq: 0, headHash: GENESIS_HASH }),
    {
      earliestSeq: 1,
      gapBefore: false,
      headSeq: 0,
      count: 0,
      nextAfterSeq: 0,
    },
  );
  const capped = buildFeedPage(events, {
    afterSeq: 0,
    limit: 500,
    earliestSeq: 1,
    headSeq: 8,
    headHash: events[7]!.hash,
  });
  t.equal(capped.events.at(-1)!.seq, 8, 'events past the head read are left out');
  t.throws(() => buildFeedPage(events, { afterSeq: 0.5, limit: 5, earliestSeq: 1, ...head }), {
    code: 'ERR_AUDIT_BAD_QUERY',
  });
  t.throws(() => buildFeedPage(events, { afterSeq: 0, limit: 0, earliestSeq: 1, ...head }), {
    code: 'ERR_AUDIT_BAD_QUERY',
  });
});

/** Polls the log like a consumer: afterSeq = last nextAfterSeq, verifying every page. */
async function consume(
  log: ReturnType<typeof createAuditLog>,
  from: AuditAnchor,
  limit: number,
): Promise<{ anchor: AuditAnchor; pages: number; seen: AuditEvent[] }> {
  let anchor = from;
  let pages = 0;
  const seen: AuditEvent[] = [];
  for (;;) {
    const page = (await log.feedPage({
      afterSeq: String(anchor.seq),
      limit: String(limit),
    })) as AuditFeedPage;
    pages++;
    const r = verifyFeedPage(JSON.parse(JSON.stringify(page)), anchor);
    if (!r.ok) throw new Error(`feed broke at ${r.firstBadSeq}: ${r.problem}`);
    seen.push(...page.events);
    anchor = { seq: r.headSeq, hash: r.headHash };
    if (page.count > 0) {
      // The specification's rule, spelled out: each prevHash equals the previous hash.
      for (let i = 1; i < page.events.length; i++) {
        if (page.events[i]!.prevHash !== page.events[i - 1]!.hash) throw new Error('prevHash');
      }
    }
    if (r.caughtUp) {
      if (seen.length > 0 && seen.at(-1)!.hash !== page.headHash)
        throw new Error('caught up but not on headHash');
      return { anchor, pages, seen };
    }
    if (pages > 100) throw new Error('no progress');
  }
}

t.test('a consumer polls the feed to the head, then follows new events', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store);
  const first = await consume(log, { seq: 0, hash: GENESIS_HASH }, 10);
  t.same(first.anchor, { seq: 0, hash: GENESIS_HASH }, 'an empty chain: caught up at genesis');
  for (let i = 0; i < 23; i++) {
    await log.record({ action: 'run-trigger', actor, outcome: 'applied', target: `job-${i % 3}` });
  }
  const r1 = await consume(log, first.anchor, 10);
  t.equal(r1.seen.length, 23);
  t.equal(r1.pages, 3, '10 + 10 + 3');
  t.same(r1.anchor, await log.head());
  for (let i = 0; i < 4; i++)
    await log.record({ action: 'job-delete', actor, outcome: 'applied', target: 'job-x' });
  const r2 = await consume(log, r1.anchor, 10);
  t.same(
    r2.seen.map((e) => e.seq),
    [24, 25, 26, 27],
    'only the new events',
  );
  const idle = await consume(log, r2.anchor, 10);
  t.equal(idle.seen.length, 0, 'an idle poll is one empty page');
  t.equal(idle.pages, 1);
});

t.test('verifyFeedPage detects tampering, rewrites and gaps', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store);
  for (let i = 0; i < 8; i++)
    await log.record({ action: 'run-trigger', actor, outcome: 'applied', detail: { n: i } });
  const page = await log.feedPage({ afterSeq: '0', limit: '4' });
  const r = verifyFeedPage(page);
  t.match(r, { ok: true, headSeq: 4, caughtUp: false, gap: false });
  const anchor = { seq: 4, hash: page.events[3]!.hash };

  // A stored event edited in place is caught by the next poll.
  (store.rows[5]!.event.detail as { n: number }).n = 99;
  const tampered = await log.feedPage({ afterSeq: '4' });
  t.match(verifyFeedPage(tampered, anchor), { ok: false, problem: 'hash-mismatch', firstBadSeq: 6 });

  // The whole chain rewritten consistently from seq 3: a consumer holding seq 4 notices.
  const rows = store.rows;
  let prevHash = rows[1]!.hash;
  for (const row of rows.slice(2)) {
    const ev = { ...row.event, prevHash, hash: '' } as unknown as AuditEvent;
    if (row.seq === 3) (ev.detail as { n: number }).n = 1000;
    row.prevHash = prevHash;
    row.hash = hashEvent(ev);
    row.event = { ...row.event, prevHash };
    prevHash = row.hash;
  }
  const rewritten = await log.feedPage({ afterSeq: '4' });
  t.match(verifyFeedPage(rewritten, anchor), { ok: false, problem: 'prev-mismatch', firstBadSeq: 5 });
  t.ok((await log.verify()).ok, 'the engine-side verify alone cannot see a consistent rewrite');

  const idle = await log.feedPage({ afterSeq: '8' });
  t.match(verifyFeedPage(idle, { seq: 8, hash: anchor.hash }), {
    ok: false,
    problem: 'head-mismatch',
    firstBadSeq: 8,
  });

  store.pruneBefore(7);
  const gapped = await log.feedPage({ afterSeq: '4' });
  t.equal(gapped.gapBefore, true);
  t.match(verifyFeedPage(gapped, anchor), { ok: false, problem: 'seq-gap', firstBadSeq: 5, gap: true });
  t.match(verifyFeedPage(gapped, anchor, { acceptGap: true }), {
    ok: true,
    gap: true,
    caughtUp: true,
    headSeq: 8,
  });

  const shorter = { ...idle, afterSeq: 9, nextAfterSeq: 9, headSeq: 8 };
  t.match(verifyFeedPage(shorter, { seq: 9, hash: anchor.hash }), {
    ok: false,
    problem: 'truncated',
    firstBadSeq: 9,
  });
});

t.test('verifyFeedPage refuses malformed pages', async (t) => {
  const events = chain(3);
  const good = buildFeedPage(events, {
    afterSeq: 0,
    limit: 500,
    earliestSeq: 1,
    headSeq: 3,
    headHash: events[2]!.hash,
  });
  const bad: Array<[string, unknown]> = [
    ['not a page', { kind: 'engine-audit-export' }],
    ['wrong v', { ...good, v: 2 }],
    ['count', { ...good, count: 2 }],
    ['nextAfterSeq', { ...good, nextAfterSeq: 2 }],
    ['gapBefore', { ...good, gapBefore: true }],
    ['past head', { ...good, headSeq: 2 }],
    ['empty with events after', { ...good, events: [], count: 0, nextAfterSeq: 0 }],
    ['headHash', { ...good, headHash: 'x' }],
    ['afterSeq not the anchor', { ...good, afterSeq: 1, events: good.events.slice(1), count: 2 }],
  ];
  t.plan(bad.length + 1);
  t.ok(verifyFeedPage(good).ok);
  for (const [name, page] of bad)
    t.throws(() => verifyFeedPage(page), { code: 'ERR_AUDIT_MALFORMED_DOCUMENT' }, name);
});
