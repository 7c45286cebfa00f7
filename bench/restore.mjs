#!/usr/bin/env node
// `pnpm bench:restore`: restores the ~1 GiB data set of the backup benchmark (the shared generator
// bench/archive-dataset.mjs, as bench/backup.mjs) into an
// EMPTY directory THROUGH THE RUNNING ENGINE (`node apps/engine/dist/main.js`, SQLite state,
// local-filesystem destination) and reports MiB/s next to `restic restore` of the same data in the
// same bench, as a ratio (target >= 1.2).
//
// What is timed:
// - engine: wall time from `POST /admin/restore` with `confirm: true` (target under
//   ENGINE_RESTORE_ROOTS) to the apply reading `succeeded` on `GET /admin/restore/applies`. It
//   includes the plan recomputation, phase one (every record read back and verified, nothing
//   written) and phase two (every record read again, re-verified and written: temp file + rename).
//   The phase-one / phase-two split is printed from the apply's progress.
// - restic: `restic restore latest --target DIR` from a repository made once with `restic backup`
//   of the same tree (restic verifies each blob's MAC and hash while it restores; it has no
//   separate verify-everything-first phase).
// - coffer-recover: `coffer-recover extract --from <the engine's destination directory> --run ID
//   --key <break-glass secret key> --to DIR --trust-unpinned-signer` (apps/recover/dist/cli.js; the
//   offline path an operator takes without the engine: every record checked against its SHA-384
//   before it is put in place, no separate verify phase), next to `restic restore` as a ratio
//   (target >= 1.2). BENCH_SKIP_RECOVER=1 leaves it out.
// - optionally (BENCH_DIRECT=1) the same apply through @coffer/restore in this process, with the
//   engine's keys, to separate HTTP/engine costs from the package's.
// Fairness: the page cache is warmed (source read once, both repositories are read once by a
// first untimed restore each); engine and restic restores are interleaved per repetition; figures
// are medians over BENCH_REPEAT repetitions (default 3), every sample printed. Each restored tree is
// checked (file count and byte total) right after its restore; the trees are removed only after
// the last repetition (BENCH_REMOVE_BETWEEN=1: each right after its check, as before). Why: on an
// ext4 without a journal (this machine's) the inode allocator skips every inode deleted in the
// last seconds (minutes while its inode table block is dirty), one buffer lookup each, so creating
// files just after 20,000 were removed costs 0.1-1 ms of kernel CPU per create, and which tool
// lands in the block groups of the removed tree depends on where the kernel places directories:
// removing between restores measured that allocator state as much as either restore.
// Every timed tool starts after a `sync` (untimed): otherwise it ran while the kernel wrote back
// the previous tool's gigabyte of restored files, and whichever tool came second paid for it
// (coffer-recover extract measured 3.9 s alone and 6.1 s right after the engine's restore).
// - coffer-recover verify (the offline full verify: every pack or shard read, every chunk or
//   record digest checked) next to `restic check --read-data` of the same data, interleaved per
//   repetition; BENCH_SKIP_VERIFY=1 leaves it out.
// - peak RSS of every tool per figure: the engine's from its VmHWM reset before each restore
//   (bench/lib/peak-rss.mjs), the children's from GNU time's maximum resident set size when
//   /usr/bin/time is installed (apt-get install -y time).
// BENCH_INCREMENTAL=1 backs up with the job option `incremental` (archive format 0.2, docs/jobs.md),
// so every figure is of a chunked run.
// Environment: BENCH_SCALE (default 1), BENCH_REPEAT (default 3), BENCH_SKIP_RESTIC=1, BENCH_SKIP_RECOVER=1,
// BENCH_SKIP_VERIFY=1, BENCH_INCREMENTAL=1, BENCH_DIRECT=1, BENCH_REMOVE_BETWEEN=1, BENCH_ENGINE_ARGS
// (extra node flags for the engine, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"), BENCH_ENGINE_MAIN
// (another build's main.js).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MIB, root, startEngine, tally, warmDataSet } from './lib/engine-bench.mjs';
import { machineNotes } from './lib/machine.mjs';
import { peakRss } from './lib/peak-rss.mjs';

const given = { ...process.env };
const scale = given.BENCH_SCALE ?? '1';
const repeat = Math.max(1, Number(given.BENCH_REPEAT ?? '3'));
const work = join(root, 'bench', '.data', 'restore');
const engineMain = given.BENCH_ENGINE_MAIN ?? join(root, 'apps/engine/dist/main.js');

// 1. The data set (the same bytes bench:backup and bench:archive use), page cache warmed.
const { sourceDir, totalBytes, files } = warmDataSet(scale);
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'targets'), { recursive: true });

// 2. The engine, with a restore root.
const targets = join(work, 'targets');
const engineArgs = (given.BENCH_ENGINE_ARGS ?? '').split(/\s+/).filter(Boolean);
const {
  engine,
  engineEnv,
  engineData,
  api,
  stop: stopEngine,
  exit: engineExit,
  breakGlassKeyFile,
} = await startEngine({ work, engineMain, engineArgs, env: { ENGINE_RESTORE_ROOTS: targets } });
const requireFromEngine = createRequire(join(root, 'apps/engine/package.json'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** Waits until the previous tool's writes reached the disk (see the header). */
const flushWrites = () => spawnSync('sync');
// CPU seconds (user + system, every thread): the engine's from /proc/<pid>/stat, restic's from this
// process's waited-for children. On a shared machine wall time depends on what else runs; CPU time
// much less, so both are reported.
const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
const statFields = (pid) =>
  readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
const engineCpu = () => {
  const f = statFields(engine.pid);
  return (Number(f[11]) + Number(f[12])) / TICK;
};
const childrenCpu = () => {
  const f = statFields('self');
  return (Number(f[13]) + Number(f[14])) / TICK;
};
const engineRss = peakRss(engine.pid);
// Children run under GNU time (when installed) for their peak RSS: `-f %M` is kibibytes.
const gnuTime = spawnSync('/usr/bin/time', ['-f', '%M', 'true'], { encoding: 'utf8' }).status === 0;
const rssFile = join(work, 'child-rss');
/** spawnSync of `cmd args` with the child's peak RSS in MiB (null without GNU time). */
function spawnMeasured(cmd, args, options) {
  const r = gnuTime
    ? spawnSync('/usr/bin/time', ['-o', rssFile, '-f', '%M', cmd, ...args], options)
    : spawnSync(cmd, args, options);
  const rssMiB =
    gnuTime && r.status === 0 ? Number(readFileSync(rssFile, 'utf8').trim().split('\n').at(-1)) / 1024 : null;
  return { ...r, rssMiB };
}

// 3. One backup through the engine.
const jobId = 'bench-restore';
const created = await api('/jobs', {
  id: jobId,
  cadenceSeconds: 86400,
  source: { type: 'files', path: sourceDir },
  ...(given.BENCH_INCREMENTAL === '1' ? { incremental: true } : {}),
});
if (created.status !== 200) throw new Error(`job not created: ${JSON.stringify(created.body)}`);
const trig = await api('/trigger', { id: jobId });
const runId = trig.body.runId;
if (!runId) throw new Error(`trigger: ${trig.status} ${JSON.stringify(trig.body)}`);
const b0 = performance.now();
for (;;) {
  await sleep(200);
  const run = (await api(`/history?id=${jobId}`)).body.runs.find((x) => x.runId === runId);
  if (run && run.status !== 'running') {
    if (run.status !== 'ok') throw new Error(`backup run ${run.status} ${run.reason}`);
    break;
  }
}
console.log(`engine backup: ${((performance.now() - b0) / 1000).toFixed(1)} s (run ${runId})`);

let n = 0;
const freshTarget = () => join(targets, `t${++n}`);
const removeBetween = given.BENCH_REMOVE_BETWEEN === '1';
const restored = [];
/** A checked tree: removed now (BENCH_REMOVE_BETWEEN=1) or after the last repetition. */
const done = (dir) => (removeBetween ? rmSync(dir, { recursive: true, force: true }) : restored.push(dir));
function checkTree(dir, label) {
  const t = tally(dir);
  if (t.files !== files || t.bytes !== totalBytes)
    throw new Error(
      `${label}: restored ${t.files} files / ${t.bytes} bytes, expected ${files} / ${totalBytes}`,
    );
}

async function engineRestore(label) {
  const dir = freshTarget();
  flushWrites();
  engineRss.reset();
  const c0 = engineCpu();
  const t0 = performance.now();
  const r = await api('/restore', { runId, confirm: true, target: { namespaceId: dir } });
  if (r.status !== 202) throw new Error(`apply: ${r.status} ${JSON.stringify(r.body)}`);
  let phaseTwoAt = null;
  for (;;) {
    await sleep(25);
    const s = (await api(`/restore/applies?id=${r.body.applyId}`)).body;
    if (phaseTwoAt === null && s.progress && s.progress.phase !== 'verify') phaseTwoAt = performance.now();
    if (s.status === 'running') continue;
    const seconds = (performance.now() - t0) / 1000;
    const cpu = engineCpu() - c0;
    if (s.status !== 'succeeded')
      throw new Error(`${label}: apply ${s.status} ${JSON.stringify(s.receipt ?? s.error)}`);
    checkTree(dir, label);
    done(dir);
    return {
      label,
      seconds,
      cpu,
      rssMiB: engineRss.read().bytes / MIB,
      verifySeconds: phaseTwoAt === null ? null : (phaseTwoAt - t0) / 1000,
    };
  }
}

const haveRestic = given.BENCH_SKIP_RESTIC !== '1';
const resticVersion = haveRestic
  ? spawnSync('restic', ['version'], { encoding: 'utf8' }).stdout?.trim()
  : null;
if (haveRestic && !resticVersion) throw new Error('restic not found (apt-get install -y restic)');
const repo = join(work, 'restic-repo');
const resticEnv = {
  ...process.env,
  RESTIC_PASSWORD: 'bench',
  RESTIC_REPOSITORY: repo,
  RESTIC_CACHE_DIR: join(work, 'restic-cache'),
};
if (haveRestic) {
  for (const args of [
    ['init', '--quiet'],
    ['backup', '--quiet', sourceDir],
  ]) {
    const r = spawnSync('restic', args, { env: resticEnv, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error(`restic ${args[0]} failed`);
  }
}
function resticRestore(label) {
  const dir = freshTarget();
  flushWrites();
  const c0 = childrenCpu();
  const t0 = performance.now();
  const r = spawnMeasured('restic', ['restore', 'latest', '--target', dir], {
    env: resticEnv,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${label}: restic exit ${r.status}`);
  const cpu = childrenCpu() - c0;
  checkTree(join(dir, sourceDir), label);
  done(dir);
  return { label, seconds, cpu, rssMiB: r.rssMiB };
}

/** `restic check --read-data`: every pack read and every blob checked. */
function resticCheck(label) {
  flushWrites();
  const c0 = childrenCpu();
  const t0 = performance.now();
  const r = spawnMeasured('restic', ['check', '--read-data', '--quiet'], {
    env: resticEnv,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${label}: restic exit ${r.status}`);
  return { label, seconds, cpu: childrenCpu() - c0, rssMiB: r.rssMiB };
}

// The offline reader: coffer-recover extract, as a child process (its CPU counts as a child's).
const haveRecover = given.BENCH_SKIP_RECOVER !== '1';
const recoverCli = join(root, 'apps/recover/dist/cli.js');
/** `coffer-recover <command>` on the engine's run with the break-glass key: wall, CPU, peak RSS. */
function recover(label, command, extra = []) {
  flushWrites();
  const c0 = childrenCpu();
  const t0 = performance.now();
  const r = spawnMeasured(
    process.execPath,
    [
      recoverCli,
      command,
      '--from',
      join(engineData, 'destination'),
      '--run',
      runId,
      '--key',
      breakGlassKeyFile,
      ...extra,
      '--trust-unpinned-signer',
      '--no-progress',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${label}: coffer-recover exit ${r.status}: ${r.stderr}`);
  return { label, seconds, cpu: childrenCpu() - c0, rssMiB: r.rssMiB };
}

function recoverExtract(label) {
  const dir = freshTarget();
  const result = recover(label, 'extract', ['--to', dir]);
  checkTree(dir, label);
  done(dir);
  return result;
}

// The offline full verify: coffer-recover verify (every pack or shard and every record digest).
const haveVerify = haveRecover && given.BENCH_SKIP_VERIFY !== '1';
const recoverVerify = (label) => recover(label, 'verify');

// 4. Optional: the package directly, in this process, with the engine's keys.
let direct = null;
if (given.BENCH_DIRECT === '1') {
  const { loadConfig } = await import(pathToFileURL(join(root, 'apps/engine/dist/config.js')).href);
  const { loadKeys } = await import(pathToFileURL(join(root, 'apps/engine/dist/keys.js')).href);
  const restore = await import(pathToFileURL(requireFromEngine.resolve('@coffer/restore')).href);
  const objectstore = await import(pathToFileURL(requireFromEngine.resolve('@coffer/objectstore')).href);
  const keys = loadKeys(loadConfig(engineEnv));
  const store = objectstore.createFsStore({ root: join(engineData, 'destination') });
  direct = async (label) => {
    const dir = freshTarget();
    flushWrites();
    const t0 = performance.now();
    let phaseTwoAt = null;
    const receipt = await restore.applyRestore({
      stores: { default: store },
      defaultDestinationId: 'default',
      job: jobId,
      operationalSecretKey: keys.operational.secretKey,
      signerPublicKey: keys.signer.publicKey,
      request: { runId, confirm: true, target: { namespaceId: dir } },
      targetResolver: async (b) => (b === jobId ? { type: 'files', root: sourceDir, binding: jobId } : null),
      restoreRoots: [targets],
      isLatest: true,
      onProgress: (p) => {
        if (phaseTwoAt === null && p.phase !== 'verify') phaseTwoAt = performance.now();
      },
    });
    const seconds = (performance.now() - t0) / 1000;
    if (receipt.status !== 'succeeded') throw new Error(`${label}: ${receipt.status}`);
    checkTree(dir, label);
    done(dir);
    return { label, seconds, verifySeconds: phaseTwoAt === null ? null : (phaseTwoAt - t0) / 1000 };
  };
}

// 5. Warm-up (untimed): each side reads its repository once.
await engineRestore('warm-up');
if (haveRestic) resticRestore('warm-up');
if (haveRecover) recoverExtract('warm-up');

const samples = { engine: [], restic: [], direct: [], recover: [], verify: [], check: [] };
for (let rep = 1; rep <= repeat; rep++) {
  samples.engine.push(await engineRestore('engine restore (HTTP apply)'));
  if (haveRestic) samples.restic.push(resticRestore('restic restore'));
  if (haveRecover) samples.recover.push(recoverExtract('coffer-recover extract'));
  if (direct) samples.direct.push(await direct('@coffer/restore applyRestore'));
  // Verify figures alternate which tool goes first, so neither always reads a cooler cache.
  const pair = [
    () => haveVerify && samples.verify.push(recoverVerify('coffer-recover verify')),
    () => haveVerify && haveRestic && samples.check.push(resticCheck('restic check --read-data')),
  ];
  if (rep % 2 === 0) pair.reverse();
  for (const f of pair) f();
}
stopEngine();
await engineExit;
for (const dir of restored) rmSync(dir, { recursive: true, force: true });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const summary = (list) => {
  if (list.length === 0) return null;
  const seconds = median(list.map((r) => r.seconds));
  const verify = list.every((r) => r.verifySeconds != null) ? median(list.map((r) => r.verifySeconds)) : null;
  const cpu = list.every((r) => r.cpu != null) ? median(list.map((r) => r.cpu)) : null;
  const rss = list.every((r) => r.rssMiB != null) ? Math.max(...list.map((r) => r.rssMiB)) : null;
  return {
    label: list[0].label,
    seconds,
    cpu,
    rss,
    verify,
    mibps: totalBytes / MIB / seconds,
    all: list.map((r) => r.seconds.toFixed(2)).join(' '),
  };
};
const fmt = (r) =>
  `${r.label.padEnd(32)} ${r.seconds.toFixed(2).padStart(7)} s  ${r.mibps.toFixed(1).padStart(7)} MiB/s` +
  (r.cpu !== null ? `  CPU ${r.cpu.toFixed(1)} s` : '') +
  (r.rss !== null ? `  peak RSS ${r.rss.toFixed(0)} MiB` : '') +
  (r.verify !== null
    ? `  [plan + verify ${r.verify.toFixed(2)} s, write ${(r.seconds - r.verify).toFixed(2)} s]`
    : '') +
  `  samples: ${r.all}`;
const eng = summary(samples.engine);
console.log(
  `\nData set: ${files} files, ${(totalBytes / MIB).toFixed(0)} MiB = ${(totalBytes / 1024 ** 3).toFixed(2)} GiB (scale ${scale}; ${sourceDir})`,
);
console.log(
  `Medians of ${repeat} repetition(s), into an empty directory each time (restored trees removed ${removeBetween ? 'between restores' : 'after the last one'}); load average at the end ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${(await import('node:os')).availableParallelism()} CPUs`,
);
for (const line of machineNotes()) console.log(line);
console.log(fmt(eng));
const dir = summary(samples.direct);
if (dir) console.log(fmt(dir));
const rec = summary(samples.recover);
if (rec) console.log(fmt(rec));
if (haveRestic) {
  const rr = summary(samples.restic);
  console.log(`${resticVersion}`);
  console.log(fmt(rr));
  console.log(
    `ratio (engine / restic restore throughput): ${(eng.mibps / rr.mibps).toFixed(2)}  (target >= 1.2)`,
  );
  console.log(
    `CPU time ratio (restic / engine CPU seconds; >= 1: the engine needs no more CPU): ${(rr.cpu / eng.cpu).toFixed(2)}`,
  );
  if (rec) {
    console.log(
      `ratio (coffer-recover extract / restic restore throughput): ${(rec.mibps / rr.mibps).toFixed(2)}  (target >= 1.2)`,
    );
    console.log(`CPU time ratio (restic / coffer-recover CPU seconds): ${(rr.cpu / rec.cpu).toFixed(2)}`);
  }
  const ver = summary(samples.verify);
  const chk = summary(samples.check);
  if (ver && chk) {
    console.log(fmt(ver));
    console.log(fmt(chk));
    console.log(
      `ratio (restic check --read-data / coffer-recover verify wall time): ${(chk.seconds / ver.seconds).toFixed(2)}; CPU ${(chk.cpu / ver.cpu).toFixed(2)}  (target >= 1.5)`,
    );
  }
}
const out = join(root, 'bench', '.data', 'restore-last.json');
writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), totalBytes, files, samples }, null, 2));
