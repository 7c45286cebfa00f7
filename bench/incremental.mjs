#!/usr/bin/env node
// `pnpm bench:incremental`: the figures of issue #21 (incremental, deduplicated runs), engine vs
// restic in the same run on the same bytes. The engine is driven THROUGH ITS HTTP API (`node
// apps/engine/dist/main.js`, SQLite state, local-filesystem destination) with the job exactly as
// bench/backup.mjs configures it (`{ id, cadenceSeconds, source: { type: 'files', path } }`, so
// `skipUnchanged: false`); nothing here depends on how the engine implements a run, so the same
// script measures incremental runs once the engine has them. restic: `restic backup` into a local
// repository (Debian's package: `apt-get install -y restic`).
//
// Figures (each: engine wall, CPU s, peak RSS; restic wall, CPU s, peak RSS; ratio
// restic_time / engine_time, so > 1 means Coffer is faster):
//   1. first run;
//   2. second run, nothing changed;
//   3. second run after churn: 1 % of the small files rewritten with new content of the same size
//      and one 25 MiB file with 64 KiB overwritten at its middle offset (size unchanged), seeded
//      (bench/lib/churn.mjs), applied once to the shared source before both tools run;
//   4. repository size after BENCH_SIZE_RUNS (10) runs with a fresh 1 % churn before every run:
//      apparent bytes of the regular files under the engine's destination directory vs restic's
//      repository directory (caches excluded on both sides), as engine/restic and per-run growth.
//
// Data: the shared set of bench/archive-dataset.mjs (20,000 small files, 20 x 25 MiB, logs;
// ~1 GiB at scale 1), cached under bench/.data and never modified: the bench works on a private
// hard-link copy (bench/.data/incremental/source) that churn only ever replaces file by file,
// and removes bench/.data/incremental when it ends (also after a failure).
//
// Fairness and conventions (as bench/backup.mjs):
// - every repetition uses a FRESH engine process with an empty data dir and a fresh restic
//   repository, so a first run is a first run even when the engine deduplicates across jobs;
// - the source's page cache is warmed (every file read once) before each timed phase, and `sync`
//   runs before every timed run so write-back of the previous run's or the churn's dirty pages
//   does not land in the next one;
// - within a phase both tools run back to back on the same source state; the order alternates per
//   repetition (engine first in odd ones, restic first in even ones);
// - engine wall = `POST /admin/trigger` to the run reading `ok` (sealing, read-back verification
//   of what the run wrote, bookkeeping); CPU = user + system seconds of the engine process;
//   peak RSS = its VmHWM reset before each run. restic: wall, CPU of the child, peak RSS from GNU
//   time's maximum resident set size (when /usr/bin/time is installed);
// - timed figures are medians over BENCH_REPEAT repetitions (default 3: a repetition is ~30 s at
//   scale 1, and one sample of a 1-6 s run is too noisy on a shared 2-core machine); the size
//   series over BENCH_SIZE_REPEAT (default 1: sizes barely vary between repetitions and ten runs
//   per tool are the costliest part). Every sample is printed, and beside it the ratio of each
//   repetition's back-to-back pair and their median (the figure least moved by drift of the
//   machine between repetitions).
// - per-GiB figures (seconds, CPU seconds per GiB of source; RSS) are printed so that "flat from
//   1 to 10 GiB" can be read off a BENCH_SCALE=1 and a BENCH_SCALE=10 run.
// Disk: the bench needs about (cached set) + 3 x set (engine, three timed runs, today's full
// copies) + 1 x set (restic) at a time in the timed part; before every run it checks that the
// file system keeps BENCH_DISK_RESERVE_GIB (default 5) free after the run's expected growth. In
// the size series, a run that would not fit stops the series early and the figures after
// BENCH_SIZE_RUNS runs are extrapolated from the median per-run growth, marked as such (at
// BENCH_SCALE=10 today's engine, which stores a full copy per run, gets about five runs into
// ~75 GB free).
// The last line is `BENCH_INCREMENTAL_JSON {...}`: every figure, for pasting into a note.
// Environment: BENCH_SCALE (default 1), BENCH_REPEAT (default 3), BENCH_SIZE_REPEAT (default 1),
// BENCH_SIZE_RUNS (default 10), BENCH_SKIP_RESTIC=1, BENCH_SKIP_TIMED=1 / BENCH_SKIP_SIZE=1 (one
// part only), BENCH_DISK_RESERVE_GIB (default 5), BENCH_ENGINE_ARGS (extra node flags for the
// engine), BENCH_ENGINE_MAIN (another build's main.js, for A/B comparisons).
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { apparentBytes, applyChurn, freeBytes, linkCopy } from './lib/churn.mjs';
import { MIB, root, startEngine, tally, warmDataSet } from './lib/engine-bench.mjs';
import { machineNotes } from './lib/machine.mjs';
import { engineRun, median, timedCommand } from './lib/measure.mjs';
import { peakRss } from './lib/peak-rss.mjs';

// A copy, so the lint rule about turbo-cached environment reads (irrelevant to a benchmark) stays quiet.
const given = { ...process.env };
const scale = given.BENCH_SCALE ?? '1';
const repeat = Math.max(1, Number(given.BENCH_REPEAT ?? '3'));
const sizeRepeat = Math.max(1, Number(given.BENCH_SIZE_REPEAT ?? '1'));
const sizeRuns = Math.max(2, Number(given.BENCH_SIZE_RUNS ?? '10'));
const haveRestic = given.BENCH_SKIP_RESTIC !== '1';
const doTimed = given.BENCH_SKIP_TIMED !== '1';
const doSize = given.BENCH_SKIP_SIZE !== '1';
const reserve = Number(given.BENCH_DISK_RESERVE_GIB ?? '5') * 1024 ** 3;
const work = join(root, 'bench', '.data', 'incremental');
const engineMain = given.BENCH_ENGINE_MAIN ?? join(root, 'apps/engine/dist/main.js');
const engineArgs = (given.BENCH_ENGINE_ARGS ?? '').split(/\s+/).filter(Boolean);
const GIB = 1024 ** 3;
const loadAtStart = loadavg()[0];

const resticVersion = haveRestic
  ? spawnSync('restic', ['version'], { encoding: 'utf8' }).stdout?.trim()
  : null;
if (haveRestic && !resticVersion) throw new Error('restic not found (apt-get install -y restic)');

// 1. The shared data set (generated once, cached), warmed; the private copy the churn works on.
const { sourceDir: cachedDir, totalBytes, files } = warmDataSet(scale);
const gib = totalBytes / GIB;
rmSync(work, { recursive: true, force: true });
const src = join(work, 'source');
const copy = linkCopy(cachedDir, src);
const sync = () => spawnSync('sync');
// Worst case of the timed part with an engine that stores a full copy per run (today's):
// three engine runs and restic's repository at once; the per-run checks below are the real guard.
console.log(
  `disk: ${(freeBytes(work) / GIB).toFixed(1)} GiB free; the timed part needs up to ~${(gib * 4.2).toFixed(1)} GiB at a time, the size series stops early when the next run would not fit`,
);

/** Throws (timed part) or returns false (size series) when a run expected to add `growth` bytes would not fit. */
function fits(growth, what) {
  const free = freeBytes(work);
  if (free - growth >= reserve) return true;
  console.log(
    `disk: ${what} may add ${(growth / GIB).toFixed(1)} GiB, ${(free / GIB).toFixed(1)} GiB free, reserve ${(reserve / GIB).toFixed(0)} GiB`,
  );
  return false;
}

async function freshPair(dir) {
  mkdirSync(dir, { recursive: true });
  const eng = await startEngine({ work: dir, engineMain, engineArgs });
  const rss = peakRss(eng.engine.pid);
  const jobId = 'bench-incremental';
  const job = {
    id: jobId,
    cadenceSeconds: 86400,
    source: { type: 'files', path: src },
    // BENCH_INCREMENTAL=1: the job option `incremental` (archive format 0.2, docs/jobs.md).
    ...(given.BENCH_INCREMENTAL === '1' ? { incremental: true } : {}),
  };
  // The job is created just before its first triggered run, as bench/backup.mjs does: a job
  // without runs is due, and the scheduler's poll would otherwise start its first run on its own
  // while restic is being timed (restic goes first in even repetitions).
  let created = false;
  const createJob = async () => {
    const r = await eng.api('/jobs', job);
    if (r.status !== 200) throw new Error(`job not created: ${JSON.stringify(r.body)}`);
    created = true;
  };
  const repo = join(dir, 'restic-repo');
  const resticEnv = {
    ...process.env,
    RESTIC_PASSWORD: 'bench',
    RESTIC_REPOSITORY: repo,
    RESTIC_CACHE_DIR: join(dir, 'restic-cache'),
  };
  if (haveRestic) {
    const init = spawnSync('restic', ['init', '--quiet'], { env: resticEnv, stdio: 'inherit' });
    if (init.status !== 0) throw new Error('restic init failed');
  }
  const destination = join(eng.engineData, 'destination');
  return {
    engine: async (label) => {
      if (!created) await createJob();
      return engineRun({ api: eng.api, pid: eng.engine.pid, rss, jobId, label });
    },
    restic: (label) => timedCommand('restic', ['backup', '--quiet', src], { env: resticEnv, label }),
    engineBytes: () => apparentBytes(destination),
    resticBytes: () => apparentBytes(repo),
    close: async () => {
      rss.stop();
      eng.stop();
      await eng.exit;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const PHASES = [
  ['first', 'first run'],
  ['unchanged', 'second run, nothing changed'],
  ['churn', 'second run after 1 % churn + 25 MiB file modified'],
];
const timed = Object.fromEntries(PHASES.map(([k]) => [k, { engine: [], restic: [] }]));
const churns = [];
const size = [];
let pair = null;
try {
  // 2. Timed runs: per repetition a fresh engine and repository, three phases, tools interleaved.
  for (let rep = 1; doTimed && rep <= repeat; rep++) {
    pair = await freshPair(join(work, `timed-${rep}`));
    const order = rep % 2 === 1 ? ['engine', 'restic'] : ['restic', 'engine'];
    const lastGrowth = { engine: 0, restic: 0 };
    for (const [phase, title] of PHASES) {
      if (phase === 'churn') churns.push(applyChurn(src, { seed: `timed-${rep}` }));
      tally(src, true);
      for (const tool of order) {
        if (tool === 'restic' && !haveRestic) continue;
        const before = tool === 'engine' ? pair.engineBytes() : pair.resticBytes();
        if (
          !fits(phase === 'first' ? totalBytes * 1.05 : lastGrowth[tool] * 1.1 + 64 * MIB, `${tool} ${phase}`)
        )
          throw new Error('not enough disk for the timed runs (lower BENCH_SCALE or BENCH_DISK_RESERVE_GIB)');
        sync();
        const r = await pair[tool](`${tool} ${title}`);
        lastGrowth[tool] = (tool === 'engine' ? pair.engineBytes() : pair.resticBytes()) - before;
        timed[phase][tool].push(r);
        console.log(
          `  rep ${rep} ${r.label}: ${r.seconds.toFixed(2)} s, CPU ${r.cpu.toFixed(1)} s` +
            (r.rssMiB === null ? '' : `, peak RSS ${r.rssMiB.toFixed(0)} MiB`) +
            (r.records != null ? `, records ${JSON.stringify(r.records)}` : ''),
        );
      }
    }
    await pair.close();
    pair = null;
  }

  // 3. Repository size: a fresh engine and repository, a fresh churn before every run.
  for (let rep = 1; doSize && rep <= sizeRepeat; rep++) {
    pair = await freshPair(join(work, `size-${rep}`));
    const series = { engine: [], restic: [], engineSeconds: [], resticSeconds: [], stoppedAfter: null };
    for (let run = 1; run <= sizeRuns; run++) {
      const growth = (xs) =>
        xs.length === 0 ? totalBytes * 1.05 : (xs.at(-1) - (xs.at(-2) ?? 0)) * 1.1 + 64 * MIB;
      if (!fits(growth(series.engine) + (haveRestic ? growth(series.restic) : 0), `size run ${run}`)) {
        series.stoppedAfter = run - 1;
        break;
      }
      churns.push(applyChurn(src, { seed: `size-${rep}-${run}` }));
      sync();
      const e = await pair.engine(`engine size run ${run}`);
      series.engine.push(pair.engineBytes());
      series.engineSeconds.push(e.seconds);
      let line = `  size rep ${rep} run ${run}: engine ${(series.engine.at(-1) / MIB).toFixed(1)} MiB (${e.seconds.toFixed(2)} s)`;
      if (haveRestic) {
        sync();
        const r = pair.restic(`restic size run ${run}`);
        series.restic.push(pair.resticBytes());
        series.resticSeconds.push(r.seconds);
        line += `, restic ${(series.restic.at(-1) / MIB).toFixed(1)} MiB (${r.seconds.toFixed(2)} s)`;
      }
      console.log(line);
    }
    size.push(series);
    await pair.close();
    pair = null;
  }
} finally {
  if (pair) await pair.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}

// 4. Report.
const f1 = (x) => (x == null || Number.isNaN(x) ? null : Math.round(x * 1000) / 1000);
const sum = (list) =>
  list.length === 0
    ? null
    : {
        wall: f1(median(list.map((r) => r.seconds))),
        cpu: f1(median(list.map((r) => r.cpu))),
        rssMiB: list.every((r) => r.rssMiB != null) ? f1(median(list.map((r) => r.rssMiB))) : null,
        maxRssMiB: list.every((r) => r.rssMiB != null) ? f1(Math.max(...list.map((r) => r.rssMiB))) : null,
        wallPerGiB: f1(median(list.map((r) => r.seconds)) / gib),
        cpuPerGiB: f1(median(list.map((r) => r.cpu)) / gib),
        samples: list.map((r) => f1(r.seconds)),
      };
const figures = {};
for (const [phase, title] of PHASES) {
  const e = sum(timed[phase].engine);
  const r = sum(timed[phase].restic);
  figures[phase] = {
    title,
    engine: e,
    restic: r,
    ratioWall: e && r ? f1(r.wall / e.wall) : null,
    ratioCpu: e && r ? f1(r.cpu / e.cpu) : null,
    // Each repetition's pair ran back to back on the same source state: their ratio cancels the
    // machine's drift between repetitions (CPU seconds of the same work varied by a third here).
    pairedWall:
      e && r
        ? timed[phase].engine
            .map((x, i) => f1((timed[phase].restic[i]?.seconds ?? Number.NaN) / x.seconds))
            .filter((x) => x !== null)
        : null,
  };
  const p = figures[phase].pairedWall;
  figures[phase].ratioWallPaired = p === null || p.length === 0 ? null : f1(median(p));
}

/** Size after `n` runs and the median growth of runs 2.., extrapolated when the series stopped early. */
function sizeFigure(bytes) {
  if (bytes.length === 0) return null;
  const growths = bytes.slice(1).map((b, i) => b - bytes[i]);
  const g = growths.length > 0 ? median(growths) : null;
  const done = bytes.length;
  const after =
    done >= sizeRuns ? bytes[sizeRuns - 1] : g === null ? null : bytes[done - 1] + (sizeRuns - done) * g;
  return { firstBytes: bytes[0], afterBytes: after, growthMedianBytes: g, runs: done, bytes, growths };
}
const sizes = size.map((s) => ({
  engine: sizeFigure(s.engine),
  restic: haveRestic ? sizeFigure(s.restic) : null,
  extrapolated: s.engine.length < sizeRuns,
  engineSecondsMedianChurnRuns: f1(median(s.engineSeconds.slice(1))),
  resticSecondsMedianChurnRuns: haveRestic ? f1(median(s.resticSeconds.slice(1))) : null,
}));
const sizeMed = (pick) => (sizes.length === 0 ? null : median(sizes.map(pick)));
const sizeSummary =
  sizes.length === 0 || sizes[0].engine === null
    ? null
    : {
        runs: sizeRuns,
        extrapolated: sizes.some((s) => s.extrapolated),
        engineBytes: sizeMed((s) => s.engine.afterBytes),
        resticBytes: haveRestic ? sizeMed((s) => s.restic.afterBytes) : null,
        engineGrowthPerRun: sizeMed((s) => s.engine.growthMedianBytes),
        resticGrowthPerRun: haveRestic ? sizeMed((s) => s.restic.growthMedianBytes) : null,
        engineFirstBytes: sizeMed((s) => s.engine.firstBytes),
        resticFirstBytes: haveRestic ? sizeMed((s) => s.restic.firstBytes) : null,
        engineWallChurnRun: sizeMed((s) => s.engineSecondsMedianChurnRuns),
        resticWallChurnRun: haveRestic ? sizeMed((s) => s.resticSecondsMedianChurnRuns) : null,
        series: sizes,
      };
if (sizeSummary && haveRestic) {
  const div = (a, b) => (a == null || b == null ? null : f1(a / b));
  sizeSummary.ratio = div(sizeSummary.engineBytes, sizeSummary.resticBytes);
  sizeSummary.growthRatio = div(sizeSummary.engineGrowthPerRun, sizeSummary.resticGrowthPerRun);
}

console.log(
  `\nData set: ${files} files, ${(totalBytes / MIB).toFixed(0)} MiB = ${gib.toFixed(2)} GiB (scale ${scale}; private hard-link copy of ${cachedDir}: ${copy.linked} linked, ${copy.copied} copied)`,
);
const c0 = churns[0];
if (c0)
  console.log(
    `Churn per round: ${c0.smallFiles} small files rewritten (~${(c0.smallBytes / 1024).toFixed(0)} KiB in round 1), one large file with ${c0.patchBytes / 1024} KiB overwritten at its middle offset`,
  );
console.log(
  `Timed: medians of ${doTimed ? repeat : 0} repetition(s); size series: ${doSize ? sizeRepeat : 0} repetition(s) of ${sizeRuns} runs`,
);
if (resticVersion) console.log(`${resticVersion} (Debian 12 packages restic 0.14)`);
for (const line of machineNotes()) console.log(line);
console.log(
  `load average (1 min) at start ${loadAtStart.toFixed(2)}, at end ${loadavg()[0].toFixed(2)} on ${availableParallelism()} CPUs: other work on the machine slows both tools (CPU seconds are less affected than wall time)`,
);
const cell = (s) =>
  s === null
    ? ''.padEnd(52)
    : `${s.wall.toFixed(2).padStart(7)} s ${s.cpu.toFixed(1).padStart(6)} CPU-s ${(s.rssMiB === null ? '-' : s.rssMiB.toFixed(0)).padStart(5)} MiB ${s.wallPerGiB.toFixed(2).padStart(6)} s/GiB`;
if (doTimed) {
  console.log(
    `\n${'figure'.padEnd(52)} ${'engine: wall, CPU, peak RSS, per GiB'.padEnd(52)} ${'restic: wall, CPU, peak RSS, per GiB'.padEnd(52)} restic/engine wall, CPU`,
  );
  for (const [phase] of PHASES) {
    const f = figures[phase];
    console.log(
      `${f.title.padEnd(52)} ${cell(f.engine)} ${cell(f.restic)} ` +
        (f.ratioWall === null ? '' : `${f.ratioWall.toFixed(2)}x, ${f.ratioCpu.toFixed(2)}x`),
    );
    console.log(
      `${''.padEnd(52)} samples: engine ${f.engine.samples.join(' ')}` +
        (f.restic ? `; restic ${f.restic.samples.join(' ')}` : '') +
        (f.ratioWallPaired === null
          ? ''
          : `; restic/engine per repetition ${f.pairedWall.map((x) => x.toFixed(2)).join(' ')} (median ${f.ratioWallPaired.toFixed(2)}x)`),
    );
  }
}
const x2 = (v) => (v == null ? '-' : `${v.toFixed(2)}x`);
if (sizeSummary) {
  const m = (b) => (b === null ? '-' : `${(b / MIB).toFixed(1)} MiB`);
  console.log(
    `\nrepository size after ${sizeRuns} runs, 1 % churn each${sizeSummary.extrapolated ? ' (EXTRAPOLATED: the series stopped early, see above)' : ''}:`,
  );
  console.log(
    `  engine ${m(sizeSummary.engineBytes)} (first run ${m(sizeSummary.engineFirstBytes)}, median growth per run ${m(sizeSummary.engineGrowthPerRun)}, median churned-run wall ${sizeSummary.engineWallChurnRun ?? '-'} s)`,
  );
  if (haveRestic) {
    console.log(
      `  restic ${m(sizeSummary.resticBytes)} (first run ${m(sizeSummary.resticFirstBytes)}, median growth per run ${m(sizeSummary.resticGrowthPerRun)}, median churned-run wall ${sizeSummary.resticWallChurnRun ?? '-'} s)`,
    );
    console.log(
      `  engine/restic: ${x2(sizeSummary.ratio)} total, ${x2(sizeSummary.growthRatio)} per-run growth (target <= 1.1x total)`,
    );
  }
}
const rssAll = PHASES.flatMap(([p]) => timed[p].engine.map((r) => r.rssMiB));
if (rssAll.length > 0)
  console.log(`peak engine RSS over the timed runs: ${Math.max(...rssAll).toFixed(0)} MiB`);
console.log(
  `BENCH_INCREMENTAL_JSON ${JSON.stringify({
    scale: Number(scale),
    load: [f1(loadAtStart), f1(loadavg()[0])],
    files,
    bytes: totalBytes,
    gib: f1(gib),
    repeat: doTimed ? repeat : 0,
    sizeRepeat: doSize ? sizeRepeat : 0,
    restic: resticVersion,
    figures,
    size: sizeSummary,
  })}`,
);
