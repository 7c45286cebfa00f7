// Secrets never travel in text: a marker secret planted in every input that reaches an error path
// or a result must not appear in any message, code, stack, result, feed page, export or CSV.
import t from 'tap';
import {
  type AuditEventInput,
  type AuditStore,
  assertNoSecrets,
  buildEvent,
  createAuditLog,
  createMemoryAuditStore,
  parseFeedQuery,
  parseListQuery,
  toCsv,
  verifyChain,
  verifyExportDocument,
  verifyFeedPage,
} from '../src/index.ts';

const MARKER = 'dps_MARKERc0ffee4f9c2e7b1aSecretValue';
const BARE = 'MARKERc0ffee4f9c2e7b1aSecretValue';
/** A fixed random-looking base64url secret (a real one would come from randomBytes). */
const BLOB = 'q3Zp9Lk2Vx8Tn4Rb7Wc1Ym6Hs0Jd5Gf2Ka8Ue3Io9Pq';

function text(x: unknown): string {
  if (x instanceof Error) return `${x.message} ${x.stack} ${JSON.stringify(x)}`;
  return JSON.stringify(x);
}

t.test('error paths never carry the marker', async (t) => {
  const base: AuditEventInput = {
    action: 'run-trigger',
    actor: { email: null, subject: null, method: 'engine' },
    outcome: 'applied',
  };
  const attempts: Array<() => unknown> = [
    () => buildEvent(null, { ...base, action: MARKER as never }),
    () => buildEvent(null, { ...base, outcome: MARKER as never }),
    () => buildEvent(null, { ...base, actor: { ...base.actor, method: MARKER as never } }),
    () => buildEvent(null, { ...base, role: `${BARE}${'x'.repeat(64)}` }),
    () => buildEvent(null, { ...base, detail: { [BARE]: Number.NaN } }),
    () =>
      buildEvent(null, {
        ...base,
        detail: { list: Array.from({ length: 300 }, () => `${BARE.slice(0, 20)}`) },
      }),
    () => buildEvent({ seq: 1, hash: MARKER }, base),
    () => assertNoSecrets({ nested: { value: MARKER } }),
    () => assertNoSecrets({ [MARKER]: 1 }),
    () => parseFeedQuery({ afterSeq: MARKER }),
    () => parseListQuery({ action: MARKER }),
    () => parseListQuery({ actor: MARKER.repeat(20) }),
    () => parseListQuery({ since: MARKER }),
    () => parseListQuery({ beforeSeq: MARKER }),
    () => verifyExportDocument({ kind: MARKER }),
    () => verifyFeedPage({ kind: 'engine-audit-feed', v: 1, headHash: MARKER }),
    () => verifyChain([], { anchor: { seq: 1, hash: MARKER } }),
  ];
  t.plan(attempts.length * 2);
  for (const attempt of attempts) {
    const err = t.throws(attempt) as Error;
    t.notMatch(text(err), BARE, (err as { code?: string }).code ?? 'error');
  }
});

t.test('results, pages, exports and CSV never carry the marker', async (t) => {
  const store = createMemoryAuditStore();
  const log = createAuditLog(store);
  const e = await log.record({
    action: 'credential-mint',
    actor: { email: `x${MARKER}`, subject: `Bearer ${BARE}`, method: 'admin-token' },
    sourceAddress: MARKER,
    target: `https://user:${BARE}@example.com`,
    outcome: 'applied',
    detail: {
      scope: 'audit-feed',
      secret: BARE,
      presented: `dpc_abcd.${MARKER}`,
      blob: BLOB,
      note: `${BARE} `.repeat(20),
      nested: { [MARKER]: { list: [`Basic ${BARE}`] }, [BLOB]: true },
    },
  });
  t.notMatch(text(e), BLOB, 'random blob');
  t.notMatch(text(e), BARE, 'recorded event');
  t.notMatch(text(store.rows), BARE, 'stored row');
  t.notMatch(text(await log.feedPage({})), BARE, 'feed page');
  t.notMatch(toCsv([e]), BARE, 'csv');
  t.notMatch(text(await log.exportDocument()), BARE, 'export');
  // A tampered chain's result names seqs and problems only.
  (store.rows[0]!.event.detail as Record<string, string>).scope = MARKER;
  const report = await log.verify();
  t.equal(report.ok, false);
  t.notMatch(text(report), BARE, 'verify report');
  t.notMatch(text(verifyChain([{ ...e, action: BARE.toLowerCase() }])), BARE.toLowerCase(), 'chain result');

  const failing: AuditStore = {
    ...createMemoryAuditStore(),
    head: async () => {
      throw Object.assign(new Error(`postgres://u:${BARE}@h/db`), { code: BARE });
    },
  };
  const err = await createAuditLog(failing)
    .head()
    .catch((x: unknown) => x);
  t.notMatch(text(err), BARE, 'store failure');
});
