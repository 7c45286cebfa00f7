#!/usr/bin/env node
// `pnpm bench:soak`: the kill soak (issue 23). SOAK_REPLICAS engine replicas (the built
// `apps/engine/dist/main.js`, default 3) share one fresh PostgreSQL database and one fresh bucket
// on the loopback radosgw (scripts/services/postgres.sh, s3.sh; settings in .test-services/*.env);
// small `files` jobs run on the shortest cadence the job schema allows (60 s) and, for
// SOAK_TRIGGERED of them, back to back through `POST /admin/trigger` (a few source files are
// rewritten before each run); every few seconds one replica is SIGKILLed and started again, for
// SOAK_SECONDS. The victim is, when there is one, a replica holding a run lock (the `leases` row
// `run:<job>` names its instance id), so the kill lands on a run in flight; after most kills it
// stays down until another replica took its runs over (a takeover), after SOAK_QUICK_SHARE of them
// it comes back at once and takes its own runs back (a self-resume: its instance id is kept in its
// data dir).
//
// At the end (jobs paused so nothing new starts, every replica up again, every run settled) it
// checks, and exits 1 when any fails:
// - settled: no run is still `running` or `parked` SOAK_SETTLE_SECONDS after the soak;
// - classified: every run that is not `ok` is `failed`/`abandoned` with a reason of the closed
//   list (`isFailureReason` of the engine's own apps/engine/dist/runs/reasons.js);
// - committed once: at most one `run-ok` log line per run id over every replica's logs; every
//   `ok` run has exactly one manifest in the bucket and every manifest belongs to a run the state
//   store showed; no two runs of one job overlap in time (one run lock per job);
// - manifests signed: every manifest in the bucket is well formed and verifies under the engine's
//   signer (`coffer-recover inspect --pin-signer`, the fingerprint from `GET /admin/support`);
// - verified: every `ok` run verifies offline with the break-glass secret key
//   (`coffer-recover verify --key`, made by `coffer-recover keygen` for this soak);
// - audit: `GET /admin/audit/verify` says ok, and the export verifies offline
//   (`verifyExportDocument` of @coffer/audit).
// Figures: runs by state, kills (and how many hit a replica holding a run), takeovers (runs whose
// `detail.holder` in the state store moved to another replica), self-resumes, and the takeover
// time (SIGKILL of the holder to the `detail.resumedAt` the new holder wrote): median and max.
// The state store is read directly (PostgreSQL, every SOAK_POLL_MS) because the per-job history
// ring keeps only the newest 50 runs.
//
// Environment: SOAK_SECONDS (600), SOAK_REPLICAS (3), SOAK_JOBS (4), SOAK_TRIGGERED (jobs
// triggered back to back; default half of SOAK_JOBS, rounded up; the others run on their 60 s
// cadence only), SOAK_JOB_MIB (data per job, default 8), SOAK_FILES (files per job, 24),
// SOAK_KILL_EVERY (seconds between a replica's return and the next kill, randomised 0.5x-1.5x;
// default 6), SOAK_QUICK_SHARE (0.25), SOAK_MAX_DOWN (seconds a victim waits for the takeover,
// default lease + 25), SOAK_LEASE_SECONDS (ENGINE_RUN_LEASE_SECONDS of the replicas, default 5,
// the engine's minimum), SOAK_TRIGGER_GAP (mean pause in seconds between a triggered job's runs,
// default 1), SOAK_HOLDER_WAIT (seconds a kill waits for a replica holding a run lock before it
// takes any replica, default 3), SOAK_VERIFY_JOBS (coffer-recover verify processes at once, 2),
// SOAK_SETTLE_SECONDS (180), SOAK_POLL_MS (250), SOAK_DIR (work directory, default
// bench/.data/soak, emptied first), SOAK_RESULT (a file to write the JSON summary to),
// SOAK_SEED (random seed, for a repeatable kill/trigger pattern), SOAK_KEEP=1 (keep the work dir),
// SOAK_ENGINE_ARGS (extra node flags for every replica, e.g. `--import ./hook.mjs`).
import { spawn, spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const given = { ...process.env };
const int = (name, dflt, min = 0) => {
  const v = given[name] === undefined || given[name] === '' ? dflt : Number(given[name]);
  if (!Number.isFinite(v) || v < min) throw new Error(`${name} must be a number >= ${min}`);
  return v;
};
const SECONDS = int('SOAK_SECONDS', 600, 1);
const REPLICAS = int('SOAK_REPLICAS', 3, 2);
const JOBS = int('SOAK_JOBS', 4, 1);
const TRIGGERED = Math.min(JOBS, int('SOAK_TRIGGERED', Math.ceil(JOBS / 2)));
const JOB_MIB = int('SOAK_JOB_MIB', 8, 0.01);
const FILES = int('SOAK_FILES', 24, 1);
const KILL_EVERY = int('SOAK_KILL_EVERY', 6, 0.5);
const QUICK_SHARE = int('SOAK_QUICK_SHARE', 0.25);
const LEASE = int('SOAK_LEASE_SECONDS', 5, 5);
const MAX_DOWN = int('SOAK_MAX_DOWN', LEASE + 25, 1);
const SETTLE = int('SOAK_SETTLE_SECONDS', 180, 1);
const POLL_MS = int('SOAK_POLL_MS', 250, 50);
const TRIGGER_GAP = int('SOAK_TRIGGER_GAP', 1);
const VERIFY_JOBS = int('SOAK_VERIFY_JOBS', 2, 1);
const HOLDER_WAIT = int('SOAK_HOLDER_WAIT', 3);
const ENGINE_ARGS = (given.SOAK_ENGINE_ARGS ?? '').split(/\s+/).filter(Boolean);
const work = given.SOAK_DIR || join(root, 'bench', '.data', 'soak');
const resultFile = given.SOAK_RESULT || null;
const engineMain = join(root, 'apps/engine/dist/main.js');
const recoverCli = join(root, 'apps/recover/dist/cli.js');
for (const f of [engineMain, recoverCli, join(root, 'apps/engine/dist/runs/reasons.js')])
  if (!existsSync(f))
    throw new Error(
      `${f} missing: run \`pnpm --filter @coffer/engine build && pnpm --filter @coffer/recover build\``,
    );

// A small seeded generator (mulberry32), so SOAK_SEED replays the same choices.
let seed = int('SOAK_SEED', Math.floor(Math.random() * 2 ** 31)) >>> 0;
const seedUsed = seed;
const rand = () => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let x = seed;
  x = Math.imul(x ^ (x >>> 15), x | 1);
  x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (msg) => console.log(`[soak ${new Date().toISOString().slice(11, 19)}] ${msg}`);

const fromEngine = createRequire(join(root, 'apps/engine/package.json'));
const fromTestkit = createRequire(fromEngine.resolve('@coffer/testkit'));
const testkit = await import(pathToFileURL(fromEngine.resolve('@coffer/testkit')).href);
const audit = await import(pathToFileURL(fromEngine.resolve('@coffer/audit')).href);
const { isFailureReason } = await import(pathToFileURL(join(root, 'apps/engine/dist/runs/reasons.js')).href);
const pg = (await import(pathToFileURL(fromTestkit.resolve('pg')).href)).default;

// ---------------------------------------------------------------------------------------------
// 1. Work dir, source data, break-glass key, database, bucket.

rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const jobIds = Array.from({ length: JOBS }, (_, i) => `soak-${i + 1}`);
const sourceOf = (job) => join(work, 'sources', job);
const fileBytes = Math.max(1, Math.floor((JOB_MIB * 1024 * 1024) / FILES));
/** Writes one source file through a temp file + rename: a run reading the old one keeps its inode. */
function writeSourceFile(job, i) {
  // Sizes vary (0.25x to 1.75x of the mean) so shards and records are not all alike.
  const size = Math.max(1, Math.floor(fileBytes * (0.25 + (1.5 * ((i * 7919) % FILES)) / FILES)));
  const buf = Buffer.allocUnsafe(size);
  randomFillSync(buf);
  const dir = join(sourceOf(job), `d${i % 4}`);
  mkdirSync(dir, { recursive: true });
  const tmp = join(sourceOf(job), `.tmp-${i}`);
  writeFileSync(tmp, buf);
  renameSync(tmp, join(dir, `f${i}.bin`));
}
/** Rewrites 1 or 2 random files of a job (the "some files change between runs" part). */
const mutate = (job) => {
  for (let n = 1 + Math.floor(rand() * 2); n > 0; n--) writeSourceFile(job, Math.floor(rand() * FILES));
};
for (const job of jobIds) for (let i = 0; i < FILES; i++) writeSourceFile(job, i);

const bgKey = join(work, 'break-glass.key');
const kg = spawnSync(process.execPath, [recoverCli, 'keygen', '--out', bgKey], { encoding: 'utf8' });
if (kg.status !== 0) throw new Error(`coffer-recover keygen: ${kg.stderr}`);

const dbUrl = await testkit.postgresUrl();
const bucket = await testkit.createTestBucket('coffer-soak');
const prefix = 'coffer';
const s3Url = `s3://${bucket.bucket}/${prefix}?endpoint=${encodeURIComponent(bucket.endpoint)}&region=${bucket.region}&forcePathStyle=true`;
const db = new pg.Pool({ connectionString: dbUrl, max: 2 });
db.on('error', () => {});

// ---------------------------------------------------------------------------------------------
// 2. Replicas.

const ADMIN_TOKEN = `soak-${randomHex(24)}`;
function randomHex(n) {
  const b = Buffer.allocUnsafe(n);
  randomFillSync(b);
  return b.toString('hex');
}
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

const keysDir = join(work, 'keys');
const baseEnv = {
  ...process.env,
  HOST: '127.0.0.1',
  ENGINE_DATABASE_URL: dbUrl,
  ADMIN_TOKEN,
  ENGINE_BREAK_GLASS_PUBLIC_KEY: `${bgKey}.pub`,
  ENGINE_DESTINATIONS: `soak=${s3Url}`,
  AWS_ACCESS_KEY_ID: bucket.credentials.accessKeyId,
  AWS_SECRET_ACCESS_KEY: bucket.credentials.secretAccessKey,
  AWS_REGION: bucket.region,
  ENGINE_RUN_LEASE_SECONDS: String(LEASE),
  // info: the run-* events (run-ok, run-resumed, run-lease-lost) are read back from the logs.
  ENGINE_LOG_LEVEL: 'info',
};
for (const k of ['ENGINE_SIGNER_KEY_FILE', 'ENGINE_OPERATIONAL_KEY_FILE', 'ENGINE_TICK_SECONDS'])
  delete baseEnv[k];

const replicas = [];
const children = new Set();
// Whatever happens, no replica outlives the soak.
const killAll = () => {
  for (const c of children) c.kill('SIGKILL');
};
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    killAll();
    process.exit(130);
  });

async function startReplica(r, extraEnv = {}) {
  const out = openSync(r.logFile, 'a');
  const child = spawn(process.execPath, [...ENGINE_ARGS, engineMain], {
    env: { ...baseEnv, PORT: String(r.port), ENGINE_DATA_DIR: r.dataDir, ...extraEnv },
    // Straight into a file: a SIGKILL loses nothing buffered in a pipe, and this process's
    // event loop never holds the engine up.
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  children.add(child);
  r.child = child;
  r.exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  r.startedAt = Date.now();
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`replica ${r.name} exited during start; see ${r.logFile}`);
    try {
      if ((await fetch(`${r.url}/ready`)).ok) break;
    } catch {}
    if (i > 600) throw new Error(`replica ${r.name} not ready after 60 s; see ${r.logFile}`);
    await sleep(100);
  }
  r.up = true;
  r.instance ??= readFileSync(join(r.dataDir, 'instance-id'), 'utf8').trim();
}

async function stopReplica(r, signal = 'SIGTERM') {
  if (!r.child || r.child.exitCode !== null || r.child.signalCode !== null) return;
  r.up = false;
  r.child.kill(signal);
  const timer = setTimeout(() => r.child.kill('SIGKILL'), 15_000);
  await r.exit;
  clearTimeout(timer);
}

for (let i = 1; i <= REPLICAS; i++) {
  const port = await freePort();
  replicas.push({
    name: `r${i}`,
    port,
    url: `http://127.0.0.1:${port}`,
    dataDir: join(work, `r${i}`),
    logFile: join(work, `r${i}.log`),
    up: false,
    instance: null,
  });
}

// The replicas must sign and unwrap with the same keys: replica 1 creates them on its first start
// (as a lone engine does), and every replica, replica 1 included, is then pointed at copies.
await startReplica(replicas[0]);
await stopReplica(replicas[0]);
mkdirSync(keysDir, { recursive: true, mode: 0o700 });
for (const k of ['signer.key', 'operational.key']) {
  copyFileSync(join(replicas[0].dataDir, 'keys', k), join(keysDir, k));
  chmodSync(join(keysDir, k), 0o600);
}
baseEnv.ENGINE_SIGNER_KEY_FILE = join(keysDir, 'signer.key');
baseEnv.ENGINE_OPERATIONAL_KEY_FILE = join(keysDir, 'operational.key');
await Promise.all(replicas.map((r) => startReplica(r)));
log(
  `${REPLICAS} replicas up (${replicas.map((r) => `${r.name}=${r.instance}`).join(', ')}); lease ${LEASE} s; seed ${seedUsed}`,
);

const alive = () => replicas.filter((r) => r.up);
async function api(r, path, body) {
  const res = await fetch(`${r.url}/admin${path}`, {
    method: body ? 'POST' : 'GET',
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body: json, text };
}

// 60 s is the shortest cadence the job schema allows; only the S3 destination, which every
// replica shares (`default` is each replica's own data dir).
const jobConfig = (id) => ({
  id,
  cadenceSeconds: 60,
  source: { type: 'files', path: sourceOf(id) },
  destinations: ['soak'],
});
for (const id of jobIds) {
  const r = await api(replicas[0], '/jobs', jobConfig(id));
  if (r.status !== 200) throw new Error(`job ${id}: ${r.status} ${r.text}`);
}

// ---------------------------------------------------------------------------------------------
// 3. The tracker: every run the state store shows, with every holder it had.

/** runId -> { job, status, reason, startedAt, finishedAt, holders: [{ holder, resumedAt, seenAt }] } */
const runs = new Map();
const instanceName = (id) => replicas.find((r) => r.instance === id)?.name ?? id;
let pollError = null;
async function pollState() {
  const { rows } = await db.query(
    'select id, job_id, status, reason, started_at, finished_at, detail from runs',
  );
  const seenAt = Date.now();
  for (const row of rows) {
    const detail = JSON.parse(row.detail);
    let r = runs.get(row.id);
    if (!r) {
      r = { id: row.id, job: row.job_id, holders: [] };
      runs.set(row.id, r);
    }
    Object.assign(r, {
      status: row.status,
      reason: row.reason,
      startedAt: row.started_at,
      finishedAt: row.finished_at,
      strikes: detail.strikes ?? 0,
      unchangedFrom: detail.unchangedFrom ?? null,
    });
    const last = r.holders.at(-1);
    if (
      detail.holder &&
      (!last || last.holder !== detail.holder || last.resumedAt !== (detail.resumedAt ?? null))
    )
      r.holders.push({ holder: detail.holder, resumedAt: detail.resumedAt ?? null, seenAt });
  }
}
let tracking = true;
const tracker = (async () => {
  while (tracking) {
    try {
      await pollState();
    } catch (e) {
      pollError = e;
    }
    await sleep(POLL_MS);
  }
})();
const inFlight = (job) =>
  [...runs.values()].some((r) => r.job === job && (r.status === 'running' || r.status === 'parked'));

async function liveRunLeases() {
  const { rows } = await db.query("select name, holder, expires_at from leases where name like 'run:%'");
  const now = Date.now();
  return rows.filter((l) => Number(l.expires_at) > now);
}

// ---------------------------------------------------------------------------------------------
// 4. The soak: triggers, file changes and kills until SOAK_SECONDS have passed.

const t0 = Date.now();
const endAt = t0 + SECONDS * 1000;
const soaking = () => Date.now() < endAt;
const triggers = { accepted: 0, inFlight: 0, limited: 0, unreachable: 0, other: 0 };

async function triggerLoop(job) {
  while (soaking()) {
    if (inFlight(job)) {
      await sleep(300);
      continue;
    }
    const r = pick(alive());
    if (!r) {
      await sleep(300);
      continue;
    }
    mutate(job);
    try {
      const res = await api(r, '/trigger', { id: job });
      if (res.status === 200) triggers.accepted++;
      else if (res.status === 409) triggers.inFlight++;
      else if (res.status === 429) {
        triggers.limited++;
        await sleep(1000 * Math.max(1, Number(res.headers.get('retry-after')) || 1));
      } else {
        triggers.other++;
        log(`trigger ${job} on ${r.name}: ${res.status} ${res.text.slice(0, 200)}`);
      }
    } catch {
      triggers.unreachable++; // the replica was killed under the request
    }
    await sleep(TRIGGER_GAP * 1000 * (0.5 + rand()));
  }
}

async function changeLoop(job) {
  while (soaking()) {
    await sleep(5000 + rand() * 10_000);
    if (soaking()) mutate(job);
  }
}

const kills = [];
async function killLoop() {
  while (soaking()) {
    await sleep(KILL_EVERY * 1000 * (0.5 + rand()));
    if (!soaking()) break;
    // Prefer a replica holding a run lock: a kill there interrupts a run in flight.
    let holders = [];
    const waitUntil = Date.now() + HOLDER_WAIT * 1000;
    for (;;) {
      const leases = await liveRunLeases().catch(() => []);
      holders = alive().filter((r) => leases.some((l) => l.holder === r.instance));
      if (holders.length > 0 || Date.now() >= waitUntil) break;
      await sleep(150);
    }
    const victim = holders.length > 0 ? pick(holders) : pick(alive());
    if (!victim) continue;
    victim.up = false;
    victim.child.kill('SIGKILL');
    const at = Date.now();
    await victim.exit;
    await pollState().catch(() => undefined);
    const held = [...runs.values()]
      .filter((r) => r.status === 'running' && r.holders.at(-1)?.holder === victim.instance)
      .map((r) => r.id);
    const quick = rand() < QUICK_SHARE;
    const kill = { replica: victim.name, instance: victim.instance, at, held, quick, downSeconds: 0 };
    kills.push(kill);
    log(
      `SIGKILL ${victim.name} (${held.length ? `holding ${held.join(', ')}` : 'holding no run'}); ${quick || held.length === 0 ? 'back at once' : 'down until taken over'}`,
    );
    if (quick || held.length === 0) await sleep(1000 + rand() * 2000);
    else {
      const until = Date.now() + MAX_DOWN * 1000;
      while (Date.now() < until) {
        const pending = held.filter((id) => {
          const run = runs.get(id);
          return (
            run &&
            (run.status === 'running' || run.status === 'parked') &&
            run.holders.at(-1)?.holder === victim.instance
          );
        });
        if (pending.length === 0) break;
        await sleep(200);
      }
    }
    kill.downSeconds = (Date.now() - at) / 1000;
    await startReplica(victim);
  }
}

log(
  `soaking ${SECONDS} s: ${JOBS} jobs of ${JOB_MIB} MiB in ${FILES} files (${TRIGGERED} triggered back to back, all on a 60 s cadence), a kill every ~${KILL_EVERY} s`,
);
await Promise.all([
  killLoop(),
  ...jobIds.slice(0, TRIGGERED).map(triggerLoop),
  ...jobIds.slice(TRIGGERED).map(changeLoop),
]);
const soakedSeconds = (Date.now() - t0) / 1000;
log(`soak over after ${soakedSeconds.toFixed(0)} s; ${kills.length} kills; waiting for every run to settle`);

// ---------------------------------------------------------------------------------------------
// 5. Settle: every replica up, every run finished (the scheduler polls every 10 s and resumes).

for (const r of replicas) if (!r.up) await startReplica(r);
// No new runs now: every job paused (a paused job is not dispatched; resumes still happen).
for (const id of jobIds) {
  for (;;) {
    const put = await api(replicas[0], '/jobs', { ...jobConfig(id), enabled: false });
    if (put.status === 200) break;
    if (put.status !== 429) throw new Error(`pausing ${id}: ${put.status} ${put.text}`);
    await sleep(2000); // the mutation rate limit, which the triggers share
  }
}
const settleUntil = Date.now() + SETTLE * 1000;
await pollState();
while (
  Date.now() < settleUntil &&
  [...runs.values()].some((r) => r.status === 'running' || r.status === 'parked')
) {
  await sleep(500);
  await pollState().catch(() => undefined);
}
tracking = false;
await tracker;
await pollState();
const stuck = [...runs.values()].filter((r) => r.status === 'running' || r.status === 'parked');

// ---------------------------------------------------------------------------------------------
// 6. Engine-side checks: the audit chain (route and offline), the signer's fingerprint.

const auditRoute = (await api(replicas[0], '/audit/verify')).body;
const exportDoc = (await api(replicas[0], '/audit/export')).body;
const auditOffline = audit.verifyExportDocument(exportDoc);
const signerFp = (await api(replicas[0], '/support')).body?.signer?.fingerprint;
if (!signerFp) throw new Error('GET /admin/support gave no signer fingerprint');
await Promise.all(replicas.map((r) => stopReplica(r)));
await db.end();

// ---------------------------------------------------------------------------------------------
// 7. Offline checks: every manifest in the bucket, every ok run, the replicas' logs.

const recoverEnv = {
  ...process.env,
  AWS_ACCESS_KEY_ID: bucket.credentials.accessKeyId,
  AWS_SECRET_ACCESS_KEY: bucket.credentials.secretAccessKey,
};
const from = [
  '--from',
  `s3://${bucket.bucket}/${prefix}`,
  '--endpoint',
  bucket.endpoint,
  '--region',
  bucket.region,
  '--path-style',
];
const okRunsCount = () => [...runs.values()].filter((r) => r.status === 'ok').length;
const recover = (args) =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, [recoverCli, ...args, ...from, '--json', '--no-progress'], {
      env: recoverEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => {
      out += c;
    });
    child.stderr.on('data', (c) => {
      err += c;
    });
    child.on('close', (code) => {
      children.delete(child);
      let json = null;
      try {
        json = JSON.parse(out);
      } catch {}
      resolve({ code, json, out, err });
    });
  });

log(`checking every manifest and verifying every ok run offline (${okRunsCount()} ok runs)`);
const inspected = await recover(['inspect', '--pin-signer', signerFp]);
if (inspected.code !== 0 || !inspected.json)
  throw new Error(`coffer-recover inspect: exit ${inspected.code}: ${inspected.err}${inspected.out}`);
const manifests = inspected.json.runs ?? inspected.json.result?.runs ?? [];
const okRuns = [...runs.values()].filter((r) => r.status === 'ok');
const verifyFailures = [];
let verified = 0;
{
  const queue = okRuns.filter((r) => r.unchangedFrom === null);
  const worker = async () => {
    for (let r = queue.shift(); r; r = queue.shift()) {
      const v = await recover([
        'verify',
        '--run',
        r.id,
        '--job',
        r.job,
        '--key',
        bgKey,
        '--pin-signer',
        signerFp,
      ]);
      if (v.code === 0) verified++;
      else verifyFailures.push({ runId: r.id, job: r.job, exit: v.code, stderr: v.err.trim().slice(0, 400) });
    }
  };
  await Promise.all(Array.from({ length: VERIFY_JOBS }, worker));
}

// Every run-* event the replicas logged (a killed replica's file keeps what it wrote).
const events = [];
for (const r of replicas) {
  for (const line of readFileSync(r.logFile, 'utf8').split('\n')) {
    if (!line.includes('"event":"run-')) continue;
    try {
      const l = JSON.parse(line);
      events.push({ ...l, replica: r.name });
    } catch {}
  }
}

// ---------------------------------------------------------------------------------------------
// 8. Invariants and figures.

const all = [...runs.values()].sort((a, b) => a.id.localeCompare(b.id));
const invariants = [];
const check = (name, ok, detail) => invariants.push({ name, ok, detail });

check(
  'settled',
  stuck.length === 0,
  stuck.length === 0
    ? `no run in flight ${SETTLE} s after the soak at most`
    : `still in flight: ${stuck.map((r) => `${r.id} (${r.job}, ${r.status})`).join(', ')}`,
);

const unclassified = all.filter(
  (r) =>
    r.status !== 'ok' &&
    !(
      (r.status === 'failed' || r.status === 'abandoned') &&
      typeof r.reason === 'string' &&
      isFailureReason(r.reason)
    ),
);
check(
  'classified',
  unclassified.length === 0,
  unclassified.length === 0
    ? 'every run is ok, or failed/abandoned with a reason of the closed list'
    : unclassified.map((r) => `${r.id}: ${r.status} ${JSON.stringify(r.reason)}`).join('; '),
);

const okEvents = new Map();
for (const e of events) if (e.event === 'run-ok') okEvents.set(e.runId, (okEvents.get(e.runId) ?? 0) + 1);
const twiceLogged = [...okEvents].filter(([, n]) => n > 1);
const manifestCount = new Map();
for (const m of manifests) manifestCount.set(m.runId, (manifestCount.get(m.runId) ?? 0) + 1);
const okWithoutOneManifest = okRuns.filter((r) => r.unchangedFrom === null && manifestCount.get(r.id) !== 1);
const unknownManifests = manifests.filter((m) => !runs.has(m.runId));
const nonOkWithManifest = all.filter((r) => r.status !== 'ok' && manifestCount.has(r.id));
const overlaps = [];
for (const job of jobIds) {
  const mine = all.filter((r) => r.job === job).sort((a, b) => a.startedAt.localeCompare(b.startedAt));
  for (let i = 1; i < mine.length; i++) {
    const prev = mine[i - 1];
    if (prev.finishedAt === null || prev.finishedAt > mine[i].startedAt)
      overlaps.push(`${prev.id} / ${mine[i].id}`);
  }
}
check(
  'committed once',
  twiceLogged.length === 0 &&
    okWithoutOneManifest.length === 0 &&
    unknownManifests.length === 0 &&
    overlaps.length === 0,
  [
    `run-ok logged twice: ${twiceLogged.length ? twiceLogged.map(([id, n]) => `${id} x${n}`).join(', ') : 'none'}`,
    `ok runs without exactly one manifest: ${okWithoutOneManifest.map((r) => r.id).join(', ') || 'none'}`,
    `manifests of runs the state never showed: ${unknownManifests.map((m) => m.runId).join(', ') || 'none'}`,
    `overlapping runs of one job: ${overlaps.join(', ') || 'none'}`,
  ].join('; '),
);

const unsigned = manifests.filter((m) => m.check?.status !== 'ok');
check(
  'manifests signed',
  unsigned.length === 0 && manifests.length > 0,
  unsigned.length === 0
    ? `${manifests.length} manifests verify under the engine signer ${signerFp.slice(0, 23)}...`
    : unsigned.map((m) => `${m.runId}: ${m.check?.code} ${m.check?.message}`).join('; '),
);

check(
  'verified',
  verifyFailures.length === 0,
  verifyFailures.length === 0
    ? `${verified} ok runs verify offline with the break-glass key`
    : verifyFailures.map((f) => `${f.runId}: exit ${f.exit} ${f.stderr}`).join('; '),
);

check(
  'audit',
  auditRoute?.ok === true && auditOffline.ok === true,
  `GET /admin/audit/verify ok=${auditRoute?.ok} (${auditRoute?.count ?? '?'} events, head ${auditRoute?.headSeq}); export verified offline ok=${auditOffline.ok}${auditOffline.ok ? '' : ` ${JSON.stringify(auditOffline)}`}`,
);

// Takeovers: a run's holder changed to another instance. Its time: from the SIGKILL of the
// previous holder (the latest before the change) to the resume the new holder recorded.
const takeovers = [];
const selfResumes = [];
for (const r of all) {
  for (let i = 1; i < r.holders.length; i++) {
    const prev = r.holders[i - 1];
    const cur = r.holders[i];
    const resumedAt = cur.resumedAt ? Date.parse(cur.resumedAt) : cur.seenAt;
    const kill = kills.filter((k) => k.instance === prev.holder && k.at <= resumedAt).at(-1);
    if (cur.holder !== prev.holder)
      takeovers.push({
        runId: r.id,
        from: instanceName(prev.holder),
        to: instanceName(cur.holder),
        seconds: kill ? (resumedAt - kill.at) / 1000 : null,
      });
    else if (kill && kill.at > (prev.resumedAt ? Date.parse(prev.resumedAt) : 0))
      selfResumes.push({
        runId: r.id,
        replica: instanceName(cur.holder),
        seconds: (resumedAt - kill.at) / 1000,
      });
  }
}
const times = takeovers
  .map((t) => t.seconds)
  .filter((s) => s !== null)
  .sort((a, b) => a - b);
const median = (xs) =>
  xs.length === 0
    ? null
    : xs.length % 2
      ? xs[xs.length >> 1]
      : (xs[xs.length / 2 - 1] + xs[xs.length / 2]) / 2;
const byState = {};
for (const r of all) byState[r.status] = (byState[r.status] ?? 0) + 1;
const reasons = {};
for (const r of all)
  if (r.status !== 'ok') reasons[`${r.status}: ${r.reason}`] = (reasons[`${r.status}: ${r.reason}`] ?? 0) + 1;
const count = (name) => events.filter((e) => e.event === name).length;

const figures = {
  seconds: Math.round(soakedSeconds),
  replicas: REPLICAS,
  jobs: JOBS,
  runs: all.length,
  byState,
  reasons,
  kills: kills.length,
  killsHoldingRun: kills.filter((k) => k.held.length > 0).length,
  takeovers: takeovers.length,
  takeoversAfterKill: times.length,
  selfResumes: selfResumes.length,
  medianTakeoverSeconds: median(times),
  maxTakeoverSeconds: times.length ? times.at(-1) : null,
  resumedEvents: count('run-resumed'),
  leaseLostEvents: count('run-lease-lost'),
  strikes: all.reduce((s, r) => s + r.strikes, 0),
  manifests: manifests.length,
  verified,
  nonOkRunsWithManifest: nonOkWithManifest.map((r) => ({ runId: r.id, status: r.status, reason: r.reason })),
  triggers,
};
const ok = invariants.every((i) => i.ok);
const summary = {
  ok,
  invariants,
  figures,
  kills,
  takeovers,
  selfResumes,
  params: {
    SOAK_SECONDS: SECONDS,
    SOAK_REPLICAS: REPLICAS,
    SOAK_JOBS: JOBS,
    SOAK_TRIGGERED: TRIGGERED,
    SOAK_JOB_MIB: JOB_MIB,
    SOAK_FILES: FILES,
    SOAK_KILL_EVERY: KILL_EVERY,
    SOAK_QUICK_SHARE: QUICK_SHARE,
    SOAK_LEASE_SECONDS: LEASE,
    SOAK_MAX_DOWN: MAX_DOWN,
    SOAK_SEED: seedUsed,
  },
  workDir: work,
  bucket: bucket.bucket,
  leaseLost: events
    .filter((e) => e.event === 'run-lease-lost')
    .map((e) => ({ replica: e.replica, job: e.job, runId: e.runId ?? null, fence: e.fence, at: e.time })),
};
if (resultFile) writeFileSync(resultFile, `${JSON.stringify(summary, null, 2)}\n`);

const fmt = (s) => (s === null ? '-' : `${s.toFixed(1)} s`);
console.log('');
console.log(
  `Kill soak: ${REPLICAS} replicas on PostgreSQL + radosgw, ${JOBS} jobs x ${JOB_MIB} MiB, ${figures.seconds} s, lease ${LEASE} s, seed ${seedUsed}`,
);
console.log(
  `${availableParallelism()} CPUs; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
for (const line of machineNotes()) console.log(line);
const rows = [
  ['runs', String(figures.runs)],
  [
    '  by state',
    Object.entries(byState)
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
  ],
  ...Object.entries(reasons).map(([k, v]) => [`  ${k}`, String(v)]),
  ['kills (SIGKILL)', `${figures.kills} (${figures.killsHoldingRun} while holding a run)`],
  ['takeovers (run moved to another replica)', String(figures.takeovers)],
  ['self-resumes (restarted holder took its run back)', String(figures.selfResumes)],
  [
    'takeover time, SIGKILL to resume: median / max',
    `${fmt(figures.medianTakeoverSeconds)} / ${fmt(figures.maxTakeoverSeconds)}`,
  ],
  ['run-resumed / run-lease-lost log events', `${figures.resumedEvents} / ${figures.leaseLostEvents}`],
  ['manifests in the bucket / ok runs verified', `${figures.manifests} / ${figures.verified}`],
  [
    'triggers accepted / in flight / rate limited / unreachable',
    `${triggers.accepted} / ${triggers.inFlight} / ${triggers.limited} / ${triggers.unreachable}`,
  ],
];
const w = Math.max(...rows.map(([k]) => k.length));
for (const [k, v] of rows) console.log(`${k.padEnd(w)}  ${v}`);
console.log('');
for (const i of invariants) console.log(`${i.ok ? 'PASS' : 'FAIL'}  ${i.name.padEnd(17)} ${i.detail}`);
if (nonOkWithManifest.length)
  console.log(
    `note: ${nonOkWithManifest.length} non-ok run(s) left a sealed manifest: ${nonOkWithManifest.map((r) => r.id).join(', ')}`,
  );
if (pollError) console.log(`note: a state poll failed at least once: ${pollError.message}`);
console.log(ok ? '\nkill soak: every invariant holds' : '\nkill soak: INVARIANT FAILED');
if (ok && given.SOAK_KEEP !== '1') rmSync(work, { recursive: true, force: true });
else console.log(`work dir (logs, keys, sources): ${work}`);
process.exitCode = ok ? 0 : 1;
