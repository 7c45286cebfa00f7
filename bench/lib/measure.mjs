// Timing helpers shared by the benches that compare an engine run with a peer command, with the
// conventions of bench/backup.mjs: wall time from trigger to the run's end state, CPU seconds
// (user + system) from /proc/<pid>/stat, peak RSS as the engine's VmHWM reset before each run
// (bench/lib/peak-rss.mjs), medians over repetitions.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MIB } from './engine-bench.mjs';

const TICK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds (user + system) of a process; `children`: of its waited-for children instead. */
export function cpuSeconds(pid, children = false) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  // Fields 14-17 of proc(5): utime stime cutime cstime (rest[0] is field 3).
  const i = children ? 13 : 11;
  return (Number(rest[i]) + Number(rest[i + 1])) / TICK;
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const GNU_TIME = '/usr/bin/time';

/**
 * Runs a command to completion and times it: wall seconds, CPU seconds (of this process's
 * waited-for children: the command and everything it waited for) and, when GNU time is installed,
 * the command's peak RSS (its getrusage ru_maxrss) in MiB, else null.
 */
export function timedCommand(cmd, args, { env, label }) {
  const useTime = existsSync(GNU_TIME);
  const out = join(tmpdir(), `coffer-bench-time-${process.pid}`);
  const argv = useTime ? [GNU_TIME, ['-f', '%M', '-o', out, cmd, ...args]] : [cmd, args];
  const cpu0 = cpuSeconds(process.pid, true);
  const t0 = performance.now();
  const child = spawnSync(argv[0], argv[1], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(process.pid, true) - cpu0;
  if (child.status !== 0) throw new Error(`${label}: ${cmd} exit ${child.status}`);
  let rssMiB = null;
  if (useTime) {
    const kib = Number(readFileSync(out, 'utf8').trim().split('\n').pop());
    rssMiB = Number.isFinite(kib) ? kib / 1024 : null;
    rmSync(out, { force: true });
  }
  return { label, seconds, cpu, rssMiB };
}

/**
 * Triggers a run of `jobId` through the engine's admin API and polls its history until it ends
 * (as bench/backup.mjs does). `rss` is a bench/lib/peak-rss.mjs sampler of the engine process.
 * Throws unless the run ends `ok`. Returns wall and CPU seconds, peak RSS (MiB) and the run's
 * reported fields (records, unchangedFrom) so a bench can print what the engine did.
 */
export async function engineRun({ api, pid, rss, jobId, label }) {
  rss.reset();
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  const r = await api('/trigger', { id: jobId });
  const runId = r.body.runId;
  if (!runId) throw new Error(`${label}: trigger ${r.status} ${JSON.stringify(r.body)}`);
  for (;;) {
    // Polling costs the engine a little CPU (history replies): every 25 ms for the first 4 s, so
    // a run of a second or two (an unchanged incremental run) is not rounded up by as much as a
    // 100 ms poll would (5 % of its figure), then every 100 ms.
    await new Promise((res) => setTimeout(res, performance.now() - t0 < 4000 ? 25 : 100));
    const h = await api(`/history?id=${jobId}`);
    const run = h.body.runs.find((x) => x.runId === runId);
    if (!run || run.status === 'running') continue;
    const seconds = (performance.now() - t0) / 1000;
    if (run.status !== 'ok') throw new Error(`${label}: run ${run.status} ${run.reason}`);
    return {
      label,
      runId,
      seconds,
      cpu: cpuSeconds(pid) - cpu0,
      rssMiB: rss.read().bytes / MIB,
      records: run.records ?? null,
      unchangedFrom: run.unchangedFrom ?? null,
    };
  }
}
