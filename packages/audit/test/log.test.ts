// createAuditLog over a real (in-memory, serialised) store: concurrent records stay linear; the
// verify route catches edits to stored rows; exports stream and verify; store failures surface as
// ERR_AUDIT_STORE with the store's code only.
import t from 'tap';
import {
  type AuditEventInput,
  type AuditStore,
  createAuditLog,
  createMemoryAuditStore,
  GENESIS_HASH,
  rowToEvent,
  verifyChain,
  verifyExportDocument,
} from '../src/index.ts';

const actor = { email: 'ops@example.com', subject: 'sub-ops', method: 'session' } as const;
const input = (i: number): AuditEventInput => ({
  action: 'run-trigger',
  actor,
  role: 'operator',
  sourceAddress: '192.0.2.10',
  target: `job-${i}`,
  outcome: 'applied',
  detail: { i },
});

async function collect(chunks: AsyncIterable<string>): Promise<string> {
  let text = '';
  for await (const c of chunks) text += c;
  return text;
}

t.test('concurrent records stay linear and verify', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store);
  t.same(await log.head(), { seq: 0, hash: GENESIS_HASH }, 'empty head is genesis');
  const recorded = await Promise.all(Array.from({ length: 200 }, (_, i) => log.record(input(i))));
  t.same(
    recorded.map((e) => e.seq).sort((a, b) => a - b),
    Array.from({ length: 200 }, (_, i) => i + 1),
    'every seq once',
  );
  const report = await log.verify();
  t.match(report, { kind: 'engine-audit-verify', v: 1, ok: true, anchored: true, headSeq: 200, count: 200 });
  const head = await log.head();
  t.equal(head.seq, 200);
  t.equal(head.hash, store.rows.at(-1)!.hash);
  t.ok(verifyChain(store.rows.map(rowToEvent)).ok);
});

t.test('the stored row keeps the hashed object and indexed columns', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store, { now: () => new Date('2025-02-01T00:00:00Z') });
  const e = await log.record(input(1));
  const row = store.rows[0]!;
  t.equal(e.ts, '2025-02-01T00:00:00.000Z', 'the log clock');
  t.match(row, {
    seq: 1,
    ts: e.ts,
    prevHash: GENESIS_HASH,
    hash: e.hash,
    action: 'run-trigger',
    actorEmail: 'ops@example.com',
    actorSubject: 'sub-ops',
  });
  t.notOk('hash' in row.event, 'the JSON is the hashed object, without hash');
  t.same(rowToEvent(row), e);
});

t.test('verify catches each kind of edit to stored rows', async (t) => {
  const fresh = async () => {
    const store = createMemoryAuditStore();
    const log = createAuditLog(store);
    for (let i = 0; i < 12; i++) await log.record(input(i));
    return { store, log };
  };
  {
    const { store, log } = await fresh();
    (store.rows[4]!.event.detail as { i: number }).i = 1000;
    t.match(await log.verify(), { ok: false, problem: 'hash-mismatch', firstBadSeq: 5 }, 'edited JSON');
  }
  {
    const { store, log } = await fresh();
    store.rows[6]!.action = 'job-delete';
    t.match(
      await log.verify(),
      { ok: false, problem: 'hash-mismatch', firstBadSeq: 7 },
      'edited action column',
    );
  }
  {
    const { store, log } = await fresh();
    store.rows[2]!.actorEmail = 'someone-else@example.com';
    t.match(
      await log.verify(),
      { ok: false, problem: 'hash-mismatch', firstBadSeq: 3 },
      'edited actor column',
    );
  }
  {
    const { store, log } = await fresh();
    store.rows.splice(8, 1);
    t.match(await log.verify(), { ok: false, problem: 'seq-gap', firstBadSeq: 9 }, 'deleted row');
  }
  {
    const { store, log } = await fresh();
    store.rows.pop();
    // The head now reads seq 11: a dropped tail is invisible to the engine alone (docs/audit.md).
    t.match(await log.verify(), { ok: true, headSeq: 11 });
  }
  {
    const { store, log } = await fresh();
    store.pruneBefore(5);
    t.match(
      await log.verify(),
      { ok: true, anchored: false, firstSeq: 5, headSeq: 12 },
      'pruned chain: unanchored',
    );
    const page = await log.feedPage({ afterSeq: '0', limit: '3' });
    t.match(page, { earliestSeq: 5, gapBefore: true, count: 3, nextAfterSeq: 7 });
  }
});

t.test('admin list, document export and streamed exports', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store);
  for (let i = 0; i < 2500; i++) {
    await log.record(
      { ...input(i), action: i % 2 === 0 ? 'run-trigger' : 'job-upsert' },
      new Date(Date.UTC(2025, 0, 1, 0, 0, i)),
    );
  }
  const head = await log.head();
  const page = await log.list(new URLSearchParams('action=job-upsert&limit=3'));
  t.same(
    page.events.map((e) => e.seq),
    [2500, 2498, 2496],
  );
  t.equal(page.nextBeforeSeq, 2496);
  t.equal(page.headHash, head.hash);
  const older = await log.list({ action: 'job-upsert', limit: '3', beforeSeq: String(page.nextBeforeSeq) });
  t.same(
    older.events.map((e) => e.seq),
    [2494, 2492, 2490],
  );
  const window = await log.list({ since: '2025-01-01T00:00:10Z', until: '2025-01-01T00:00:12Z' });
  t.same(
    window.events.map((e) => e.seq),
    [13, 12, 11],
  );
  t.equal(window.nextBeforeSeq, null);
  await t.rejects(log.list({ since: 'soon' }), { code: 'ERR_AUDIT_BAD_QUERY' });

  const doc = await log.exportDocument();
  t.equal(doc.events.length, 2500, 'walks past the 1000-row chunks');
  t.match(verifyExportDocument(doc), { ok: true, headSeq: 2500 });

  const json = await log.openExport('json');
  t.equal(json.contentType, 'application/json');
  t.same(json.headers, { 'x-audit-head-seq': '2500', 'x-audit-head-hash': head.hash });
  const streamed = JSON.parse(await collect(json.chunks));
  t.match(verifyExportDocument(streamed), { ok: true, headSeq: 2500, count: 2500 });

  const csv = await log.openExport('csv');
  t.equal(csv.contentType, 'text/csv; charset=utf-8');
  const lines = (await collect(csv.chunks)).split('\r\n');
  t.equal(lines.length, 2502, 'header + 2500 rows + trailing empty');
  t.ok(lines[2500]!.endsWith(head.hash), 'the last row ends on the head hash');

  const empty = createAuditLog(createMemoryAuditStore());
  t.same(JSON.parse(await collect((await empty.openExport('json')).chunks)), {
    kind: 'engine-audit-export',
    v: 1,
    headSeq: 0,
    headHash: GENESIS_HASH,
    events: [],
  });
});

t.test('store failures are ERR_AUDIT_STORE with the store code only', async (t) => {
  const secretish = 'postgres://coffer:hunter2@127.0.0.1/db';
  const failing = (code?: string): AuditStore => {
    const fail = async () => {
      throw Object.assign(new Error(`connect failed for ${secretish}`), code === undefined ? {} : { code });
    };
    return { append: fail, head: fail, earliestSeq: fail, query: fail };
  };
  const log = createAuditLog(failing('ERR_STATE_UNAVAILABLE'));
  for (const op of [
    () => log.record(input(1)),
    () => log.head(),
    () => log.feedPage({}),
    () => log.list({}),
    () => log.verify(),
    () => log.exportDocument(),
  ]) {
    const err = (await op().then(
      () => null,
      (e: unknown) => e,
    )) as { code: string; causeCode?: string; message: string; stack?: string } | null;
    t.equal(err?.code, 'ERR_AUDIT_STORE');
    t.equal(err?.causeCode, 'ERR_STATE_UNAVAILABLE');
    t.notMatch(`${err?.message} ${err?.stack} ${JSON.stringify(err)}`, 'hunter2');
  }
  const noCode = await createAuditLog(failing('not a code: hunter2'))
    .head()
    .catch((e: { causeCode?: string; code: string }) => e);
  t.match(noCode, { code: 'ERR_AUDIT_STORE' });
  t.equal((noCode as { causeCode?: string }).causeCode, undefined, 'a code that is not ERR_* is dropped');

  // A bad input is the caller's error, not the store's, even when the store wraps what build throws.
  const wrapping: AuditStore = {
    ...createMemoryAuditStore(),
    async append(build) {
      try {
        return await createMemoryAuditStore().append(build);
      } catch {
        throw Object.assign(new Error('transaction failed'), { code: 'ERR_STATE_FAULT' });
      }
    },
  };
  await t.rejects(createAuditLog(wrapping).record({ ...input(1), action: 'nope' as never }), {
    code: 'ERR_AUDIT_UNKNOWN_ACTION',
  });
  await t.rejects(createAuditLog(createMemoryAuditStore()).feedPage({ afterSeq: '-1' }), {
    code: 'ERR_AUDIT_BAD_AFTER_SEQ',
    body: { error: 'afterSeq must be a non-negative integer' },
  });
});
