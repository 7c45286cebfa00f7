#!/usr/bin/env node
// Archive benchmark (`pnpm bench:archive`): seals a generated ~1 GiB mixed data set from the local
// filesystem into a local filesystem destination with @coffer/archive, verifies it back, and
// prints MiB/s for both, peak RSS, and this machine's single-core SHA-384 + AES-256-GCM ceiling
// (node:crypto, measured in the same run, right before each round) with the ratios the targets
// are stated in:
//   seal >= 0.7 x ceiling, verify >= 0.8 x ceiling, peak RSS < 256 MiB.
//
// Data set: bench/archive-dataset.mjs (fixed seed, under bench/.data/, git-ignored): 20,000 files
// of 1-64 KiB, log-uniform sizes (half log text, half random), 20 files of 25 MiB random, 227 MiB
// of log text in 8 files: 1,024 MiB. See that file for why log-uniform is the reading of
// "1-64 KiB ... ~ 1 GiB" (ARCHITECTURE.md "Benchmarks").
//
// What is timed: seal = reading every file from the source tree, createArchiveWriter, addRecord
// for each file in name order, finish (index, signature, manifest, _RECOVERY/): the destination is
// the fs store, which fsyncs every object. verify = verifyRun (manifest, signature, every shard's
// digest and tag, every record's SHA-384). The driver reads small files with plain synchronous
// reads into one reused buffer (the cheapest way in CPU, as the files connector does) and large
// ones with 1 MiB asynchronous reads, double-buffered. Both phases run BENCH_REPEAT times (ratios
// reported per round and as medians, because other work on the machine moves every figure);
// CPU seconds (all threads of this process) are printed per phase as a load-independent cost.
// Each round also seals once more into a store that discards the bytes (printed as a diagnostic,
// never the target): when the destination disk's write + fsync rate is the limit, it shows what
// the archive itself sustains.
//
// Environment: BENCH_SCALE (default 1; 0.1 for a quick run), BENCH_REPEAT (default 3),
// BENCH_RSS_DETAIL=1 (print where resident memory is near each phase's peak),
// BENCH_NO_BUILD=1 (skip building the packages), COFFER_ARCHIVE_WORKERS (codec worker threads;
// default cores - 1, at least 1, at most 4; records are hashed on one more thread).
//
// Node flags: the archive is sealed and verified inside the engine, which always runs with its own
// Node flags and environment (apps/engine/src/node-flags.ts: ENGINE_NODE_FLAGS, e.g.
// `--max-semi-space-size=8`, and ENGINE_NODE_ENV, e.g. MALLOC_ARENA_MAX; it re-executes itself
// with them). This benchmark measures the archive as the product runs it, so it re-executes itself
// the same way (same pid, nothing loaded yet) with those it is missing; BENCH_NODE_DEFAULTS=1 keeps
// Node's defaults (V8 then grows each thread's young generation up to 64 MiB per semi-space, about
// 100 MiB more peak RSS).
import { execFileSync } from 'node:child_process';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { open, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureDataSet } from './archive-dataset.mjs';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// Benchmark knobs (documented above); read through one alias, they are not build inputs for turbo.
const env = process.env;
// The engine's own Node flags and environment (apps/engine/src/node-flags.ts), read from its source
// so the two never drift (the fallback is only for a checkout without the engine). Only the first
// image reads it: the re-executed one is told which variables were the engine's.
const engineEnvNames = (env.BENCH_ENGINE_ENV ?? '').split(',').filter((k) => k !== '');
if (
  env.BENCH_NODE_DEFAULTS !== '1' &&
  env.BENCH_ENGINE_ENV === undefined &&
  typeof process.execve === 'function'
) {
  const engine = await import(pathToFileURL(join(root, 'apps', 'engine', 'src', 'node-flags.ts')).href).catch(
    () => ({ ENGINE_NODE_FLAGS: ['--max-semi-space-size=8'], ENGINE_NODE_ENV: {} }),
  );
  const given = [...process.execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].map((a) => a.split('=')[0]);
  const flags = engine.ENGINE_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]));
  const vars = Object.fromEntries(
    Object.entries(engine.ENGINE_NODE_ENV).filter(([k]) => env[k] === undefined),
  );
  process.execve(
    process.execPath,
    [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)],
    {
      ...env,
      ...vars,
      BENCH_ENGINE_ENV: Object.keys(engine.ENGINE_NODE_ENV).join(','),
    },
  );
}
const MIB = 1024 * 1024;
const scale = Number(env.BENCH_SCALE ?? '1');
if (!(scale > 0)) throw new Error('BENCH_SCALE must be a positive number');
const repeat = Math.max(1, Number(env.BENCH_REPEAT ?? '3') | 0);
const destDir = join(root, 'bench', '.data', 'archive-dest');
const SMALL = 1024 * 1024; // files up to this size are read whole, synchronously
const PIECE = 1024 * 1024;

// Buffers of the harness itself are allocated once, so its own garbage never counts against the
// archive's RSS.
const ceilingBuf = randomBytes(8 * MIB);
const largeBufs = [Buffer.allocUnsafe(PIECE), Buffer.allocUnsafe(PIECE)];

/**
 * Frees a cipher output now (detaches its ArrayBuffer, as the archive's codec does with its own
 * temporaries) so the ceiling's 400 MiB of cipher output is not left as garbage in this thread's
 * malloc arena, where it counted in the seal's RSS that followed.
 */
function free(u) {
  if (u.byteOffset === 0 && u.byteLength === u.buffer.byteLength && typeof u.buffer.transfer === 'function')
    u.buffer.transfer(0);
}

/** Single-core SHA-384 + AES-256-GCM over the same bytes, node:crypto, 256 KiB pieces. */
function ceiling() {
  const buf = ceilingBuf;
  const key = Buffer.alloc(32, 7);
  const run = (n) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const h = createHash('sha384');
      const c = createCipheriv('aes-256-gcm', key, Buffer.alloc(12, i & 0xff));
      for (let o = 0; o < buf.length; o += 256 * 1024) {
        const piece = buf.subarray(o, o + 256 * 1024);
        h.update(piece);
        free(c.update(piece));
      }
      c.final();
      h.digest();
    }
    return (n * 8) / ((performance.now() - t0) / 1000);
  };
  run(4);
  return Math.max(run(24), run(24));
}

/**
 * Shards the writer has in flight at most (packages/archive/src/internal/run-writer.ts: one per
 * codec worker plus STORE_AHEAD = 5), hence how many write + fsync it overlaps on the disk.
 */
function storeConcurrency() {
  const w = env.COFFER_ARCHIVE_WORKERS;
  const workers =
    w !== undefined && /^\d+$/.test(w) ? Number(w) : Math.min(4, Math.max(1, availableParallelism() - 1));
  return Math.max(1, workers) + 5;
}

/**
 * Write + fsync throughput of the destination disk (8 MiB files), for reading the seal figure:
 * with as many files at once as the writer stores (fsyncs overlap on the disk, which a serial
 * probe misses: it measured a third of what the writer gets) and, for comparison, one at a time.
 */
async function diskWrite() {
  const dir = join(destDir, 'disk-probe');
  mkdirSync(dir, { recursive: true });
  const buf = ceilingBuf;
  const put = async (name) => {
    const h = await open(join(dir, name), 'w');
    await h.write(buf);
    await h.sync();
    await h.close();
  };
  const lanes = storeConcurrency();
  const files = 4 * lanes;
  let t0 = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let i = lane; i < files; i += lanes) await put(`c${i}`);
    }),
  );
  const concurrent = (files * 8) / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  for (let i = 0; i < 8; i++) await put(`s${i}`);
  const serial = 64 / ((performance.now() - t0) / 1000);
  await rm(dir, { recursive: true, force: true });
  return { concurrent, serial, lanes };
}

/** A large file as 1 MiB pieces: the next read runs while the consumer copies the current piece. */
async function* readLarge(path, size) {
  const h = await open(path, 'r');
  try {
    const bufs = largeBufs; // one file at a time: the writer copies each piece before asking for the next
    let pos = 0;
    let i = 0;
    let pending = size > 0 ? h.read(bufs[0], 0, PIECE, 0) : null;
    while (pending !== null) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) break;
      const cur = bufs[i % 2];
      pos += bytesRead;
      pending = pos < size ? h.read(bufs[(i + 1) % 2], 0, PIECE, pos) : null;
      i++;
      yield cur.subarray(0, bytesRead);
    }
    if (pending !== null) await pending.catch(() => undefined);
  } finally {
    await h.close();
  }
}

/** Where resident memory is (BENCH_RSS_DETAIL=1): V8 heap of this thread, and mappings by kind. */
function rssBreakdown() {
  const m = process.memoryUsage();
  const out = { rss: m.rss, heapTotal: m.heapTotal, arrayBuffers: m.arrayBuffers };
  const kinds = {};
  let kind = 'anon';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) {
      const [range, , , , , path = ''] = line.split(/\s+/);
      const [a, b] = range.split('-').map((x) => Number.parseInt(x, 16));
      const size = b - a;
      kind = path.startsWith('/')
        ? 'files'
        : path === '[heap]'
          ? 'main-malloc'
          : size >= 8 * MIB && size <= 8 * MIB + 8192
            ? 'shard-buffers'
            : 'anon';
    } else if (line.startsWith('Rss:')) {
      kinds[kind] = (kinds[kind] ?? 0) + Number(line.split(/\s+/)[1]) * 1024;
    }
  }
  Object.assign(out, kinds);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Math.round(v / MIB)]));
}

/**
 * Diagnostic only: a store that keeps object sizes and discards the bytes, to show what sealing
 * costs when the destination disk (write + fsync) is not the limit. Never the target figure.
 */
function discardingStore() {
  const objects = new Map();
  const notFound = (key) =>
    Object.assign(new Error(`no object ${key}`), { code: 'ERR_OBJECTSTORE_NOT_FOUND' });
  const list = (prefix) =>
    [...objects.entries()]
      .filter(([k]) => k.startsWith(prefix))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, size]) => ({ key, size }));
  return {
    description: 'discard:',
    async put(key, body) {
      let size = 0;
      if (body instanceof Uint8Array) size = body.length;
      else for await (const c of body) size += c.length;
      objects.set(key, size);
      return {};
    },
    async get(key) {
      throw notFound(key);
    },
    async getStream(key) {
      throw notFound(key);
    },
    async head(key) {
      return objects.has(key) ? { key, size: objects.get(key) } : null;
    },
    async list(prefix) {
      return { objects: list(prefix) };
    },
    async *listAll(prefix) {
      yield* list(prefix);
    },
    async delete(key) {
      objects.delete(key);
    },
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  if (env.BENCH_NO_BUILD !== '1') {
    execFileSync(
      'pnpm',
      ['exec', 'turbo', 'run', 'build', '--filter=@coffer/archive...', '--output-logs=errors-only'],
      { cwd: root, stdio: 'inherit' },
    );
  }
  const { sourceDir, files, bytes: total } = ensureDataSet(scale);
  const archiveDir = join(root, 'packages', 'archive');
  const requireFromArchive = createRequire(join(archiveDir, 'package.json'));
  const archive = await import(pathToFileURL(join(archiveDir, 'dist', 'index.js')).href);
  const crypto = await import(pathToFileURL(requireFromArchive.resolve('@coffer/crypto')).href);
  const objectstore = await import(pathToFileURL(requireFromArchive.resolve('@coffer/objectstore')).href);

  const signer = crypto.generateSigner();
  const op = crypto.generateRecipient();
  const bg = crypto.generateRecipient();
  rmSync(destDir, { recursive: true, force: true });
  mkdirSync(destDir, { recursive: true });
  const disk = await diskWrite();

  // Per-phase RSS peak, sampled cheaply (process.memoryUsage.rss() reads one counter).
  let phase = 'setup';
  const peak = { seal: 0, verify: 0, discard: 0 };
  const breakdown = {};
  let lastBreakdown = 0;
  const sampler = setInterval(() => {
    if (!(phase in peak)) return;
    const rss = process.memoryUsage.rss() / MIB;
    if (rss > peak[phase] && env.BENCH_RSS_DETAIL === '1' && performance.now() - lastBreakdown > 250) {
      lastBreakdown = performance.now();
      breakdown[phase] = rssBreakdown();
    }
    peak[phase] = Math.max(peak[phase], rss);
  }, 20);
  const small = Buffer.allocUnsafe(SMALL);
  const rounds = [];
  const baselineRss = process.memoryUsage.rss() / MIB;
  let summary;
  for (let round = 1; round <= repeat; round++) {
    const ceil = ceiling();
    const store = objectstore.createFsStore({ root: join(destDir, `round-${round}`) });
    const runId = `run-${round}`;
    const sealInto = async (target, id) => {
      const writer = await archive.createArchiveWriter({
        store: target,
        job: 'bench',
        runId: id,
        prevRunId: null,
        signerSecretKey: signer.secretKey,
        recipients: { operational: op.publicKey, breakGlass: bg.publicKey },
        source: { type: 'files', binding: 'bench', origin: relative(root, sourceDir) },
      });
      for (const f of files) {
        let body;
        if (f.size <= SMALL) {
          const fd = openSync(f.path, 'r');
          let n = 0;
          try {
            for (let r = 1; r > 0 && n < f.size; n += r) r = readSync(fd, small, n, f.size - n, n);
          } finally {
            closeSync(fd);
          }
          body = small.subarray(0, n); // the writer copies it before addRecord resolves
        } else {
          body = readLarge(f.path, f.size);
        }
        await writer.addRecord({ name: f.name, body, size: f.size, metadata: { mode: 0o644 } });
      }
      return writer.finish();
    };
    phase = 'seal';
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    summary = await sealInto(store, runId);
    const sealSeconds = (performance.now() - t0) / 1000;
    const sealCpu = process.cpuUsage(c0);

    phase = 'verify';
    const c1 = process.cpuUsage();
    const t1 = performance.now();
    const verdict = await archive.verifyRun(store, {
      job: 'bench',
      runId,
      secretKey: op.secretKey,
      pinSigner: summary.signer,
    });
    const verifySeconds = (performance.now() - t1) / 1000;
    const verifyCpu = process.cpuUsage(c1);
    phase = 'setup';
    if (!verdict.ok) throw new Error(`verify failed: ${verdict.failure.message}`);
    if (verdict.checks.bytes !== total) throw new Error('verify did not cover every byte');
    // Diagnostic: the same seal with the bytes discarded instead of written and fsynced.
    phase = 'discard';
    const t2 = performance.now();
    await sealInto(discardingStore(), runId);
    phase = 'setup';
    const sealNoStore = total / MIB / ((performance.now() - t2) / 1000);
    const seal = total / MIB / sealSeconds;
    const verify = total / MIB / verifySeconds;
    const cpu = (c) => (c.user + c.system) / 1e6;
    rounds.push({
      ceil,
      seal,
      verify,
      sealRatio: seal / ceil,
      sealNoStore,
      sealNoStoreRatio: sealNoStore / ceil,
      verifyRatio: verify / ceil,
      sealCpu: cpu(sealCpu),
      verifyCpu: cpu(verifyCpu),
      sealSeconds,
      verifySeconds,
    });
    const r = rounds.at(-1);
    console.log(
      `round ${round}: ceiling ${r.ceil.toFixed(0)} MiB/s | seal ${r.seal.toFixed(0)} MiB/s (${r.sealRatio.toFixed(2)} x, ${r.sealSeconds.toFixed(2)} s, cpu ${r.sealCpu.toFixed(2)} s) | (seal, bytes discarded: ${r.sealNoStoreRatio.toFixed(2)} x) | verify ${r.verify.toFixed(0)} MiB/s (${r.verifyRatio.toFixed(2)} x, ${r.verifySeconds.toFixed(2)} s, cpu ${r.verifyCpu.toFixed(2)} s)`,
    );
    await rm(join(destDir, `round-${round}`), { recursive: true, force: true });
  }
  clearInterval(sampler);
  const peakRss = process.resourceUsage().maxRSS / 1024;
  const m = (k) => median(rounds.map((r) => r[k]));
  const fmt = (x) => x.toFixed(0);
  const mark = (ok) => (ok ? 'ok' : 'MISSED');
  const rows = [
    [
      'data set',
      `${files.length} files, ${fmt(total / MIB)} MiB (scale ${scale}); stored ${fmt(summary.storedBytes / MIB)} MiB in ${summary.shards} shards`,
    ],
    [
      'node flags and env (as the engine runs)',
      [...process.execArgv, ...engineEnvNames.map((k) => `${k}=${env[k]}`)].join(' ') || "Node's defaults",
    ],
    [
      'cores / codec workers',
      `${availableParallelism()} / ${env.COFFER_ARCHIVE_WORKERS ?? 'default'} (+1 record-hash thread)`,
    ],
    [
      'destination disk write+fsync',
      `${fmt(disk.concurrent)} MiB/s with ${disk.lanes} at once as the writer stores (${fmt(disk.serial)} MiB/s one at a time; 8 MiB files, fsync each)`,
    ],
    [`ceiling (1 core SHA-384 + AES-256-GCM), median of ${repeat}`, `${fmt(m('ceil'))} MiB/s`],
    [
      'seal, median',
      `${fmt(m('seal'))} MiB/s = ${m('sealRatio').toFixed(2)} x ceiling (target >= 0.7: ${mark(m('sealRatio') >= 0.7)}); cpu ${m('sealCpu').toFixed(2)} s (${(m('sealCpu') / (total / 1024 / MIB)).toFixed(2)} s per GiB)`,
    ],
    [
      'diagnostic: seal with bytes discarded, median',
      `${fmt(m('sealNoStore'))} MiB/s = ${m('sealNoStoreRatio').toFixed(2)} x ceiling (no disk writes or fsync; not the target)`,
    ],
    [
      'verify, median',
      `${fmt(m('verify'))} MiB/s = ${m('verifyRatio').toFixed(2)} x ceiling (target >= 0.8: ${mark(m('verifyRatio') >= 0.8)}); cpu ${m('verifyCpu').toFixed(2)} s (${(m('verifyCpu') / (total / 1024 / MIB)).toFixed(2)} s per GiB)`,
    ],
    [
      'peak RSS',
      `${fmt(peakRss)} MiB (target < 256: ${mark(peakRss < 256)}); sampled peaks: seal ${fmt(peak.seal)}, verify ${fmt(peak.verify)}, diagnostic seal ${fmt(peak.discard)}; before the first seal ${fmt(baselineRss)} (node, libraries, keys, the file list)`,
    ],
  ];
  console.log('');
  for (const [k, v] of rows) console.log(`${k.padEnd(48)} ${v}`);
  for (const line of machineNotes()) console.log(line);
  if (env.BENCH_RSS_DETAIL === '1') console.log('RSS near each phase peak (MiB):', JSON.stringify(breakdown));
  rmSync(destDir, { recursive: true, force: true });
  await writeFile(
    join(root, 'bench', '.data', 'archive-last.json'),
    `${JSON.stringify({ scale, repeat, total, peakRss, disk, rounds }, null, 2)}\n`,
  );
}

await main();
