// Export (JSON document and CSV) and the admin list (filters, newest-first paging).
import t from 'tap';
import {
  type AuditEvent,
  buildEvent,
  buildExportDocument,
  buildListPage,
  CSV_COLUMNS,
  csvCell,
  filterEvents,
  GENESIS_HASH,
  headHeaders,
  parseListQuery,
  toCsv,
  verifyExportDocument,
} from '../src/index.ts';

const alice = { email: 'alice@example.com', subject: 'sub-alice', method: 'session' } as const;
const bob = { email: 'bob@example.com', subject: 'sub-bob', method: 'perimeter-jwt' } as const;

function events(): AuditEvent[] {
  const out: AuditEvent[] = [];
  let prev: AuditEvent | null = null;
  const push = (e: AuditEvent) => {
    out.push(e);
    prev = e;
  };
  push(
    buildEvent(
      prev,
      { action: 'job-upsert', actor: alice, outcome: 'applied', target: 'a' },
      new Date('2025-01-01T00:00:00Z'),
    ),
  );
  push(
    buildEvent(
      prev,
      { action: 'job-delete', actor: bob, outcome: 'applied', target: 'b' },
      new Date('2025-01-02T00:00:00Z'),
    ),
  );
  push(
    buildEvent(
      prev,
      { action: 'job-upsert', actor: bob, outcome: 'refused', target: 'c' },
      new Date('2025-01-03T00:00:00Z'),
    ),
  );
  push(
    buildEvent(
      prev,
      {
        action: 'run-trigger',
        actor: alice,
        outcome: 'applied',
        target: '=HYPERLINK("x")',
        detail: { note: 'a, "quoted"\nline' },
      },
      new Date('2025-01-04T00:00:00Z'),
    ),
  );
  push(
    buildEvent(
      prev,
      { action: 'job-upsert', actor: alice, outcome: 'applied', target: 'e' },
      new Date('2025-01-05T00:00:00Z'),
    ),
  );
  return out;
}

t.test('JSON export document verifies end to end', async (t) => {
  const all = events();
  const doc = buildExportDocument([...all].reverse());
  t.match(doc, { kind: 'engine-audit-export', v: 1, headSeq: 5, headHash: all[4]!.hash });
  t.same(
    doc.events.map((e) => e.seq),
    [1, 2, 3, 4, 5],
    'oldest first',
  );
  const parsed = JSON.parse(JSON.stringify(doc));
  t.match(verifyExportDocument(parsed), { ok: true, headSeq: 5 });
  parsed.events[1].target = 'z';
  t.match(verifyExportDocument(parsed), { ok: false, problem: 'hash-mismatch', firstBadSeq: 2 });
  const short = { ...doc, events: doc.events.slice(0, 4) };
  t.match(verifyExportDocument(short), { ok: false, problem: 'truncated', firstBadSeq: 5 });
  const prunedDoc = { ...doc, events: doc.events.slice(2) };
  t.match(verifyExportDocument(prunedDoc), { ok: false, problem: 'seq-gap', firstBadSeq: 1 });
  t.match(verifyExportDocument(prunedDoc, { anchor: null }), { ok: true, firstSeq: 3 });
  t.match(verifyExportDocument(prunedDoc, { anchor: { seq: 2, hash: all[1]!.hash } }), {
    ok: true,
    count: 3,
  });
  t.same(buildExportDocument([]), {
    kind: 'engine-audit-export',
    v: 1,
    headSeq: 0,
    headHash: GENESIS_HASH,
    events: [],
  });
  t.ok(verifyExportDocument(buildExportDocument([])).ok);
  t.throws(() => verifyExportDocument({ kind: 'engine-audit-feed', v: 1 }), {
    code: 'ERR_AUDIT_MALFORMED_DOCUMENT',
  });
  t.throws(() => verifyExportDocument({ ...doc, headHash: 'x' }), { code: 'ERR_AUDIT_MALFORMED_DOCUMENT' });
  t.same(headHeaders({ seq: 5, hash: all[4]!.hash }), {
    'x-audit-head-seq': '5',
    'x-audit-head-hash': all[4]!.hash,
  });
});

t.test('CSV: RFC 4180 quoting and the formula guard', async (t) => {
  t.equal(csvCell('plain'), 'plain');
  t.equal(csvCell('a,b'), '"a,b"');
  t.equal(csvCell('say "hi"'), '"say ""hi"""');
  t.equal(csvCell('two\nlines'), '"two\nlines"');
  t.equal(csvCell('cr\rhere'), '"cr\rhere"');
  t.equal(csvCell(null), '');
  t.equal(csvCell(undefined), '');
  t.equal(csvCell(42), '42');
  t.equal(csvCell('=1+1'), "'=1+1");
  t.equal(csvCell('+1'), "'+1");
  t.equal(csvCell('-1'), "'-1");
  t.equal(csvCell('@SUM(A1)'), "'@SUM(A1)");
  t.equal(csvCell('\tx'), "'\tx");
  t.equal(csvCell('=a,b'), `"'=a,b"`, 'guard first, then quoting');

  const csv = toCsv(events());
  const lines = csv.split('\r\n');
  t.equal(lines[0], CSV_COLUMNS.join(','), 'header row');
  t.equal(lines.at(-1), '', 'trailing CRLF');
  t.ok(csv.endsWith('\r\n'));
  const row4 = lines.find((l) => l.startsWith('4,'))!;
  t.match(row4, `"'=HYPERLINK(""x"")"`, 'formula target guarded and quoted');
  t.match(row4, '"{""note"":""a, \\""quoted\\""\\nline""}"', 'detail is canonical JSON, quoted');
  t.match(
    lines[1],
    /^1,2025-01-01T00:00:00\.000Z,job-upsert,applied,session,alice@example\.com,sub-alice,,,,,a,\{\},sha384:0{96},sha384:[0-9a-f]{96}$/,
  );
  t.equal(toCsv([]), `${CSV_COLUMNS.join(',')}\r\n`);
});

t.test('admin list query rules', async (t) => {
  t.same(parseListQuery({}), { limit: 100 });
  t.same(
    parseListQuery(new URLSearchParams('action=&actor=&limit=')),
    { limit: 100 },
    'empty values are absent',
  );
  t.same(
    parseListQuery(
      new URLSearchParams(
        'action=job-upsert&actor=alice@example.com&since=2025-01-02T01:00:00+01:00&until=2025-01-04T00:00:00Z&beforeSeq=5&limit=2',
      ),
    ),
    {
      limit: 2,
      action: 'job-upsert',
      actor: 'alice@example.com',
      since: '2025-01-02T00:00:00.000Z',
      until: '2025-01-04T00:00:00.000Z',
      beforeSeq: 5,
    },
    'times are normalised to UTC milliseconds',
  );
  t.equal(
    parseListQuery(new URLSearchParams('since=2025-01-02T01:00:00%2B01:00')).since,
    '2025-01-02T00:00:00.000Z',
    'an encoded + offset',
  );
  t.equal(parseListQuery({ limit: '5000' }).limit, 1000);
  t.equal(parseListQuery({ limit: 'x' }).limit, 100);
  t.equal(parseListQuery({ limit: '0' }).limit, 1);
  const bad: Array<[Record<string, string>, string]> = [
    [{ action: 'Job Upsert' }, 'action'],
    [{ actor: 'x'.repeat(321) }, 'actor'],
    [{ since: 'yesterday' }, 'since'],
    [{ until: '2025-13-01T00:00:00Z' }, 'until'],
    [{ since: '2025-01-02T00:00:00Z', until: '2025-01-01T00:00:00Z' }, 'since must not be after until'],
    [{ beforeSeq: '0' }, 'beforeSeq'],
    [{ beforeSeq: '1.5' }, 'beforeSeq'],
    [{ beforeSeq: '-3' }, 'beforeSeq'],
    [{ beforeSeq: 'abc' }, 'beforeSeq'],
  ];
  for (const [q, name] of bad) {
    const err = t.throws(() => parseListQuery(q), { code: 'ERR_AUDIT_BAD_QUERY' }) as Error;
    t.match(err.message, name);
  }
});

t.test('filters and newest-first paging', async (t) => {
  const all = events();
  t.same(
    filterEvents(all, { action: 'job-upsert' }).map((e) => e.seq),
    [1, 3, 5],
  );
  t.same(
    filterEvents(all, { actor: 'bob@example.com' }).map((e) => e.seq),
    [2, 3],
  );
  t.same(
    filterEvents(all, { actor: 'sub-alice' }).map((e) => e.seq),
    [1, 4, 5],
    'actor matches subject too',
  );
  t.same(
    filterEvents(all, { since: '2025-01-02T00:00:00.000Z', until: '2025-01-04T00:00:00.000Z' }).map(
      (e) => e.seq,
    ),
    [2, 3, 4],
    'inclusive bounds',
  );
  const head = { seq: 5, hash: all[4]!.hash };
  const p1 = buildListPage(all, parseListQuery({ limit: '2' }), head);
  t.match(p1, {
    kind: 'engine-audit-list',
    v: 1,
    headSeq: 5,
    headHash: head.hash,
    count: 2,
    nextBeforeSeq: 4,
  });
  t.same(
    p1.events.map((e) => e.seq),
    [5, 4],
  );
  const p2 = buildListPage(all, parseListQuery({ limit: '2', beforeSeq: '4' }), head);
  t.same(
    p2.events.map((e) => e.seq),
    [3, 2],
  );
  t.equal(p2.nextBeforeSeq, 2);
  const p3 = buildListPage(all, parseListQuery({ limit: '2', beforeSeq: '2' }), head);
  t.same(
    p3.events.map((e) => e.seq),
    [1],
  );
  t.equal(p3.nextBeforeSeq, null, 'last page');
  const exact = buildListPage(all, parseListQuery({ limit: '5' }), head);
  t.equal(exact.nextBeforeSeq, null, 'exactly limit events: no next page');
  const filtered = buildListPage(all, parseListQuery({ action: 'job-upsert', limit: '2' }), head);
  t.same(
    filtered.events.map((e) => e.seq),
    [5, 3],
  );
  t.equal(filtered.nextBeforeSeq, 3);
});
