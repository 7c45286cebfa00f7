/**
 * GET /admin/preflight against a started engine over HTTP, with a real S3 destination on the
 * loopback S3 server, the default filesystem destination, an S3 destination whose bucket does not
 * exist and a filesystem destination whose root is a plain file: the working destinations are
 * verified by a write, read and delete that leaves nothing behind (and never outside
 * `_canary/preflight/`), the broken ones failed with the step and a code; the keys verified; the
 * break-glass key configured; the clock compared with the S3 server's Last-Modified; the SQLite
 * store durable; the scheduler tick failed before any tick, verified after one and failed again when
 * stale; restore roots verified, then failed when one is removed; SMTP, identity providers and the
 * update channel unconfigured; the canary waiting for its first flight. Any signed-in caller may
 * run it; an anonymous one gets 401.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { TICK_SETTING } from '../../src/runs/scheduler.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { CONSOLE, keysIn, postureWorld, session } from './helpers.ts';

const w = await postureWorld(t);
const roots = join(w.dir, 'roots');
mkdirSync(roots);
const plainFile = join(w.dir, 'not-a-directory');
writeFileSync(plainFile, 'x');
const e = await startEngine(
  t,
  {
    ENGINE_BREAK_GLASS_PUBLIC_KEY: w.breakGlassPub,
    ENGINE_DESTINATIONS: `s3ok=${w.s3Url} s3gone=${w.missingBucketUrl} fsbad=${plainFile}`,
    ENGINE_RESTORE_ROOTS: roots,
    CONSOLE_ORIGIN: CONSOLE,
  },
  { rateLimit: { max: 1000, windowSeconds: 60 } },
);

// biome-ignore lint/suspicious/noExplicitAny: the report is read field by field
async function preflight(headers: Record<string, string> = bearer()): Promise<any> {
  const r = await http(`${e.url}/admin/preflight`, { headers });
  t.equal(r.status, 200, r.text);
  return r.json();
}
// biome-ignore lint/suspicious/noExplicitAny: items are read field by field
const byId = (report: any, id: string) => report.items.find((i: { id: string }) => i.id === id);

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const d of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (d.isFile()) out.push(relative(dir, join(d.parentPath, d.name)));
  return out;
}

t.test('the first preflight: what works is verified, what is broken is failed', async (t) => {
  const report = await preflight();
  const statuses = Object.fromEntries(
    report.items.map((i: { id: string; status: string }) => [i.id, i.status]),
  );
  t.same(statuses, {
    'destination:default': 'verified',
    'destination:s3ok': 'verified',
    'destination:s3gone': 'failed',
    'destination:fsbad': 'failed',
    'keys.signer': 'verified',
    'keys.operational': 'verified',
    'keys.break-glass': 'configured',
    clock: 'verified',
    'state.durable': 'verified',
    'scheduler.tick': 'failed',
    'restore-roots': 'verified',
    smtp: 'unconfigured',
    'identity-providers': 'unconfigured',
    'update-channel': 'unconfigured',
    canary: 'configured',
  });
  t.same(report.summary, { verified: 7, configured: 2, unconfigured: 3, failed: 3, total: 15 });
  t.equal(report.ok, false, 'a failed item makes the report not ok');
  for (const i of report.items) {
    t.type(i.title, 'string');
    t.type(i.evidence, 'object');
    if (i.status === 'verified') t.equal(i.remediation, null, `${i.id}: nothing to do`);
    else t.match(i.remediation, /\w/, `${i.id}: says what to do`);
  }

  t.match(byId(report, 'destination:s3ok').evidence, {
    kind: 's3',
    description: /^s3:\/\//,
    bytes: 64,
    steps: ['write', 'read', 'compare', 'delete'],
    serverTime: /^\d{4}-/,
  });
  t.match(byId(report, 'destination:s3gone').evidence, {
    kind: 's3',
    step: 'write',
    code: 'ERR_OBJECTSTORE_REJECTED',
    storeCode: 'NoSuchBucket',
  });
  t.match(byId(report, 'destination:fsbad').evidence, {
    kind: 'fs',
    step: 'write',
    code: /^ERR_OBJECTSTORE_/,
  });
  t.match(byId(report, 'keys.signer').evidence, {
    fingerprint: e.app.keys.signer.fingerprint,
    publicHalfMatches: true,
    signsAndVerifies: true,
  });
  t.match(byId(report, 'keys.operational').evidence, { publicHalfMatches: true, sealsAndOpens: true });
  t.match(byId(report, 'keys.break-glass').evidence, {
    present: true,
    fingerprint: e.app.keys.breakGlass!.fingerprint,
    source: 'variable',
  });
  const clock = byId(report, 'clock').evidence;
  t.equal(clock.reference, 'object-store Last-Modified');
  t.same(
    clock.skews.map((s: { destination: string }) => s.destination),
    ['s3ok'],
    'only the S3 destination has an independent clock',
  );
  t.match(byId(report, 'state.durable').evidence, {
    backend: 'sqlite',
    journalMode: /wal/i,
    synchronous: /\w/,
  });
  t.match(byId(report, 'scheduler.tick').evidence, { lastTick: null, maxAgeMs: 35 * 60_000 });
  t.same(byId(report, 'restore-roots').evidence, { roots: 1, writable: 1, missingEntries: [] });
  t.same(byId(report, 'smtp').evidence, { configured: false });
  t.match(byId(report, 'canary').evidence, { lastFlightAt: null, waitingForFirstFlight: true });

  // The probes left nothing behind, anywhere.
  t.same(await keysIn(w.root), [], 'the bucket is empty again');
  t.same(filesUnder(join(e.dataDir, 'destination')), [], 'the default destination is empty again');
});

t.test('destination probes stay inside _canary/preflight/ and never show to runs', async (t) => {
  // Observe the keys the probe writes (the calls still go to the real store).
  const store = e.app.destinations.get('s3ok')!;
  const seen: string[] = [];
  const original = store.put.bind(store);
  (store as { put: typeof store.put }).put = async (key, body, options) => {
    seen.push(key);
    return original(key, body, options);
  };
  t.teardown(() => {
    (store as { put: typeof store.put }).put = original;
  });
  await preflight();
  t.equal(seen.length, 1, 'one probe object per destination');
  t.match(seen[0], /^_canary\/preflight\/[0-9TZ-]+-[0-9a-f]{12}$/);
  t.same(await keysIn(w.root), []);
});

t.test('the scheduler tick: verified after a tick, failed once stale', async (t) => {
  await e.app.runs.tick('test');
  const fresh = byId(await preflight(), 'scheduler.tick');
  t.equal(fresh.status, 'verified');
  t.match(fresh.evidence, { lastTick: /^\d{4}-/, ageMs: Number });
  t.ok(fresh.evidence.ageMs <= fresh.evidence.maxAgeMs);

  const old = (await e.app.state.settings.get<Record<string, unknown>>(TICK_SETTING))!;
  const at = new Date(Date.now() - 40 * 60_000).toISOString();
  await e.app.state.settings.set(TICK_SETTING, { ...old, at });
  const stale = byId(await preflight(), 'scheduler.tick');
  t.equal(stale.status, 'failed');
  t.equal(stale.evidence.lastTick, at);
  t.ok(stale.evidence.ageMs > 35 * 60_000, 'older than 35 minutes');
  t.match(stale.remediation, /scheduler/);
});

t.test('a restore root that disappears is failed, named by its position only', async (t) => {
  rmSync(roots, { recursive: true });
  t.teardown(() => mkdirSync(roots));
  const item = byId(await preflight(), 'restore-roots');
  t.equal(item.status, 'failed');
  t.same(item.evidence, { roots: 1, writable: 0, missingEntries: [1] });
  t.notOk(JSON.stringify(item).includes(roots), 'the path is not shown');
});

t.test('any signed-in caller may run it; nobody else', async (t) => {
  const viewer = await session(e, 'viewer');
  const report = await preflight(viewer);
  t.equal(report.summary.total, 15);
  const anon = await http(`${e.url}/admin/preflight`);
  t.equal(anon.status, 401);
});

t.test('concurrent callers share one run', async (t) => {
  const [a, b] = await Promise.all([preflight(), preflight()]);
  t.equal(a.checkedAt, b.checkedAt, 'both answers come from the same run');
  t.same(await keysIn(w.root), []);
});

t.test('PostgreSQL: the state store is durable when it answers', async (t) => {
  const pg = await startEngine(t, {
    ENGINE_DATABASE_URL: await postgresUrl(),
    ENGINE_BREAK_GLASS_PUBLIC_KEY: w.breakGlassPub,
  });
  const r = await http(`${pg.url}/admin/preflight`, { headers: bearer() });
  t.equal(r.status, 200, r.text);
  const item = byId(r.json(), 'state.durable');
  t.equal(item.status, 'verified');
  t.match(item.evidence, { backend: 'postgres', answered: true, description: /^postgres/ });
  t.notOk(r.text.includes(await postgresUrl()), 'the database URL (with its password) is not shown');
});
