#!/usr/bin/env node
// State-store durability benchmark (`pnpm bench:state`): what `synchronous=FULL` (the store's
// setting, packages/state/README.md "Durability") costs against WAL's usual `NORMAL`, on the SQLite
// state file the engine uses, measured in the same run.
//
// Two workloads, each on a fresh state directory under bench/.data/state/ (the real disk: a tmpfs
// would make every fsync free):
// - audit appends: `state.audit.append` one after the other (each is one BEGIN IMMEDIATE
//   transaction that reads the head and inserts a row, as the engine appends every audited action);
// - run records: `state.runs.start` then `state.runs.update` to `ok` (two transactions per run, the
//   least a backup run writes).
// Rounds are interleaved (FULL, NORMAL, then NORMAL, FULL, ...) so drift in the machine's load
// hits both alike; per round the operations per second (wall) and the CPU seconds of this process
// are printed, then the medians and the ratio NORMAL / FULL (how many times faster NORMAL is).
//
// Environment: BENCH_OPS (operations per workload per round, default 2000), BENCH_REPEAT (rounds,
// default 3), BENCH_NO_BUILD=1 (skip building @coffer/state).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// Benchmark knobs (documented above); read through one alias, they are not build inputs for turbo.
const env = process.env;
const ops = Number(env.BENCH_OPS ?? 2000);
const repeat = Number(env.BENCH_REPEAT ?? 3);

if (env.BENCH_NO_BUILD !== '1') {
  execFileSync('pnpm', ['turbo', 'run', 'build', '--filter=@coffer/state', '--output-logs=errors-only'], {
    cwd: root,
    stdio: 'inherit',
  });
}
const { openState } = await import(pathToFileURL(join(root, 'packages/state/dist/index.js')).href);

const base = join(root, 'bench', '.data', 'state');
rmSync(base, { recursive: true, force: true });
mkdirSync(base, { recursive: true });

let dirs = 0;
async function fresh(level) {
  const dataDir = join(base, `${level}-${dirs++}`);
  const state = await openState({ dataDir, sqliteSynchronous: level });
  const d = await state.durability();
  if (d?.synchronous !== level) throw new Error(`the store opened with synchronous=${d?.synchronous}`);
  return { state, dataDir };
}

async function measure(level, work) {
  const { state, dataDir } = await fresh(level);
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await work(state);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  await state.close();
  rmSync(dataDir, { recursive: true, force: true });
  return { perSecond: ops / wall, wall, cpu: (cpu.user + cpu.system) / 1e6 };
}

const workloads = {
  'audit appends': async (state) => {
    for (let i = 0; i < ops; i++) {
      await state.audit.append((prev) => {
        const seq = (prev?.seq ?? 0) + 1;
        const prevHash = prev?.hash ?? 'genesis';
        const event = { seq, ts: new Date().toISOString(), prevHash, action: 'bench', n: i };
        return { seq, ts: event.ts, prevHash, hash: `h${seq}`, action: 'bench', event };
      });
    }
  },
  'run records': async (state) => {
    for (let i = 0; i < ops; i++) {
      const id = `run-${i}`;
      await state.runs.start({ id, jobId: `job-${i % 10}` });
      await state.runs.update(id, { status: 'ok', finishedAt: new Date().toISOString(), records: i });
    }
  },
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);

console.log(`State store durability: SQLite WAL, synchronous FULL vs NORMAL, ${ops} operations per round`);
const summary = [];
for (const [name, work] of Object.entries(workloads)) {
  const got = { FULL: [], NORMAL: [] };
  for (let r = 0; r < repeat; r++) {
    const order = r % 2 === 0 ? ['FULL', 'NORMAL'] : ['NORMAL', 'FULL'];
    for (const level of order) {
      const m = await measure(level, work);
      got[level].push(m);
      console.log(
        `  ${name}, round ${r + 1}, ${level.padEnd(6)}: ${f1(m.perSecond)}/s (wall ${f2(m.wall)} s, CPU ${f2(m.cpu)} s)`,
      );
    }
  }
  const full = median(got.FULL.map((m) => m.perSecond));
  const normal = median(got.NORMAL.map((m) => m.perSecond));
  const cpuFull = median(got.FULL.map((m) => m.cpu));
  const cpuNormal = median(got.NORMAL.map((m) => m.cpu));
  summary.push(
    `${name}: FULL ${f1(full)}/s (CPU ${f2(cpuFull)} s), NORMAL ${f1(normal)}/s (CPU ${f2(cpuNormal)} s); NORMAL / FULL = ${f2(normal / full)}x`,
  );
}
rmSync(base, { recursive: true, force: true });
console.log(`Medians of ${repeat} round(s):`);
for (const line of summary) console.log(`  ${line}`);
console.log(
  `Load average at the end ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${availableParallelism()} CPUs`,
);
for (const line of machineNotes()) console.log(line);
