#!/usr/bin/env node
// `pnpm bench:contention`: how much a caller looping restore dry runs slows a backup, through a
// running engine (`node apps/engine/dist/main.js`, SQLite state, local-filesystem destination).
//
// Data: the shared data set (bench/archive-dataset.mjs, ~1 GiB at scale 1), page cache warmed. A
// first, untimed backup of job `reads` makes the run the looping caller dry-runs (every dry run
// reads back and hash-checks every record of it). Then, for each scenario, a backup of job
// `bench` (the same data; `skipUnchanged` off, so each run seals and verifies a full archive) is
// timed from `POST /admin/trigger` to `ok`:
// 1. alone: nothing else runs;
// 2. looped: BENCH_LOOPERS (default 4) loops of back-to-back dry runs by ONE caller (the admin
//    token), started as soon as the backup's trigger is accepted and stopped when it ends (the
//    per-caller mutation rate limit, 60 a minute, applies to them as to every mutating POST; the
//    trigger waits it out if the loops spent it), with the engine's default limits
//    (ENGINE_RESTORE_READS_PER_ENGINE=2, ENGINE_RESTORE_READS_PER_CALLER=1: one dry run in flight,
//    the others answered 429 at once, and the loop asks again immediately, as a hostile client
//    would);
// 3. unlimited: the same loops against an engine started with both limits at 64, which is what
//    every engine did before the limits existed.
// Reported: each backup's wall time and engine CPU seconds, the looping caller's answers (200 /
// 429), and the ratios looped / alone and unlimited / alone (1.0: no slowdown). Each scenario runs
// BENCH_REPEAT times (default 1); medians are printed.
// Environment: BENCH_SCALE (default 1), BENCH_REPEAT, BENCH_LOOPERS, BENCH_ENGINE_MAIN.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { root, startEngine, warmDataSet } from './lib/engine-bench.mjs';
import { machineNotes } from './lib/machine.mjs';

const given = { ...process.env };
const scale = given.BENCH_SCALE ?? '1';
const repeat = Math.max(1, Number(given.BENCH_REPEAT ?? '1'));
const loopers = Math.max(1, Number(given.BENCH_LOOPERS ?? '4'));
const engineMain = given.BENCH_ENGINE_MAIN ?? join(root, 'apps/engine/dist/main.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
const cpuOf = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return (Number(f[11]) + Number(f[12])) / TICK;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const { sourceDir, totalBytes } = warmDataSet(scale);
console.log(`data set ${(totalBytes / 2 ** 20).toFixed(0)} MiB at scale ${scale}`);

/**
 * Triggers a run of `job` (waiting out the per-caller mutation rate limit, which the looping
 * caller, the same admin token, may have spent), calls `started()` at once, and polls it to `ok`.
 * Timed from the accepted trigger.
 */
async function backup(api, pid, job, started = () => {}) {
  let trig;
  for (;;) {
    trig = await api('/trigger', { id: job });
    if (trig.status !== 429) break;
    await sleep(1000);
  }
  const c0 = cpuOf(pid);
  const t0 = performance.now();
  const runId = trig.body.runId;
  if (!runId) throw new Error(`trigger: ${trig.status} ${JSON.stringify(trig.body)}`);
  started();
  for (;;) {
    await sleep(100);
    const run = (await api(`/history?id=${job}`)).body.runs.find((x) => x.runId === runId);
    if (run && run.status !== 'running') {
      if (run.status !== 'ok') throw new Error(`backup ${run.status} ${run.reason}`);
      return { runId, seconds: (performance.now() - t0) / 1000, cpu: cpuOf(pid) - c0 };
    }
  }
}

/**
 * Loops of back-to-back dry runs of `runId` until `stop()`; counts the answers: 200, 429 of the
 * read limits (`reads`), 429 of the per-caller mutation rate limit (`mutations`, which every
 * mutating POST shares), anything else.
 */
function loop(url, token, runId) {
  const counts = { 200: 0, reads: 0, mutations: 0, other: 0 };
  let stopped = false;
  const one = async () => {
    while (!stopped) {
      try {
        const res = await fetch(`${url}/admin/restore`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ runId }),
        });
        await res.arrayBuffer();
        const policy = res.headers.get('ratelimit-policy') ?? '';
        if (res.status === 200) counts[200]++;
        else if (res.status === 429 && policy.startsWith('"restore-reads"')) counts.reads++;
        else if (res.status === 429) {
          counts.mutations++;
          await sleep(100); // a spent budget refills per window: asking faster changes nothing
        } else counts.other++;
      } catch {
        // A kept-alive connection the engine closed meanwhile (ECONNRESET): ask again.
        counts.other++;
      }
    }
  };
  const all = Promise.all(Array.from({ length: loopers }, one));
  return {
    counts,
    stop: async () => {
      stopped = true;
      await all;
    },
  };
}

async function scenario(name, env, withLoop) {
  const work = join(root, 'bench', '.data', `contention-${name}`);
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const { engine, engineEnv, url, api, stop, exit } = await startEngine({ work, engineMain, env });
  try {
    for (const id of ['reads', 'bench']) {
      const r = await api('/jobs', { id, cadenceSeconds: 86400, source: { type: 'files', path: sourceDir } });
      if (r.status !== 200) throw new Error(`job ${id}: ${JSON.stringify(r.body)}`);
    }
    const reads = await backup(api, engine.pid, 'reads');
    const samples = [];
    for (let i = 0; i < repeat; i++) {
      let looper = null;
      const b = await backup(api, engine.pid, 'bench', () => {
        if (withLoop) looper = loop(url, engineEnv.ADMIN_TOKEN, reads.runId);
      });
      await looper?.stop();
      samples.push({ ...b, answers: looper?.counts ?? null });
      console.log(
        `${name} #${i + 1}: backup ${b.seconds.toFixed(1)} s, engine CPU ${b.cpu.toFixed(1)} s${looper ? `, looping caller answered ${JSON.stringify(looper.counts)}` : ''}`,
      );
    }
    return {
      name,
      seconds: median(samples.map((s) => s.seconds)),
      cpu: median(samples.map((s) => s.cpu)),
      samples,
    };
  } finally {
    stop();
    await exit;
    rmSync(work, { recursive: true, force: true });
  }
}

const alone = await scenario('alone', {}, false);
const looped = await scenario('looped', {}, true);
const unlimited = await scenario(
  'unlimited',
  { ENGINE_RESTORE_READS_PER_ENGINE: '64', ENGINE_RESTORE_READS_PER_CALLER: '64' },
  true,
);

console.log('');
console.log(
  `${availableParallelism()} CPUs; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}; ${loopers} loop(s) of dry runs by one caller; medians of ${repeat}`,
);
for (const line of machineNotes()) console.log(line);
for (const s of [alone, looped, unlimited])
  console.log(`${s.name.padEnd(9)} backup ${s.seconds.toFixed(1)} s, engine CPU ${s.cpu.toFixed(1)} s`);
console.log(
  `ratio backup time looped / alone (default limits): ${(looped.seconds / alone.seconds).toFixed(2)}; unlimited / alone (no limits, as before): ${(unlimited.seconds / alone.seconds).toFixed(2)}`,
);
