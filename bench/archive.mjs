#!/usr/bin/env node
// Archive benchmark (`pnpm bench:archive`): seals a generated ~1 GiB mixed data set from the local
// filesystem into a local filesystem destination with @coffer/archive, verifies it back, and prints
// MiB/s for both, peak RSS, and this machine's single-core SHA-384 + AES-256-GCM ceiling
// (node:crypto, measured in the same run) with the ratios the targets are stated in:
//   seal >= 0.7 x ceiling, verify >= 0.8 x ceiling, peak RSS < 256 MiB.
//
// Data set (fixed seed, under bench/.data/, git-ignored), as in PERFORMANCE-NOTES.md:
//   20,000 files of 1-64 KiB (half text, half random), 20 files of 25 MiB random, ~227 MiB of
//   compressible log text. BENCH_SCALE=0.1 (any factor) scales every count and size for quick runs.
// Environment: BENCH_SCALE (default 1), BENCH_NO_BUILD=1 (skip building the packages),
// COFFER_ARCHIVE_WORKERS (worker threads; default cores - 1, at least 1, at most 4).
import { execFileSync, spawnSync } from 'node:child_process';
import { createCipheriv, createHash } from 'node:crypto';
import {
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MIB = 1024 * 1024;
const scale = Number(process.env.BENCH_SCALE ?? '1');
if (!(scale > 0)) throw new Error('BENCH_SCALE must be a positive number');
const dataDir = join(root, 'bench', '.data', `archive-${scale}`);
const sourceDir = join(dataDir, 'source');
const destDir = join(root, 'bench', '.data', 'archive-dest');

// ---------------------------------------------------------------------------------------------
// Data set generation (runs in a child process so its memory does not count in the peak RSS).

/** Deterministic byte stream: AES-256-CTR keystream under a key derived from the seed. */
function prng(seed) {
  const key = createHash('sha256').update(`coffer-bench-${seed}`).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return (n) => cipher.update(Buffer.alloc(n));
}

function logText(bytes, rand) {
  const levels = ['INFO', 'INFO', 'INFO', 'WARN', 'DEBUG', 'ERROR'];
  const paths = ['/api/v1/items', '/api/v1/users', '/health', '/api/v2/orders', '/static/app.js', '/login'];
  const parts = [];
  let n = 0;
  let t = 1_700_000_000_000;
  const r = rand(Math.ceil(bytes / 40) * 8 + 64);
  let i = 0;
  while (n < bytes) {
    const a = r.readUInt32LE(i % (r.length - 8));
    const b = r.readUInt32LE((i + 4) % (r.length - 8));
    i += 8;
    t += a % 2000;
    const line = `${new Date(t).toISOString()} ${levels[a % levels.length]} req=${(b % 1_000_000).toString(16)} method=GET path=${paths[b % paths.length]}/${a % 5000} status=${a % 17 === 0 ? 500 : 200} ms=${b % 900} bytes=${a % 65536}\n`;
    parts.push(line);
    n += line.length;
  }
  return Buffer.from(parts.join('')).subarray(0, bytes);
}

function generate() {
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(sourceDir, { recursive: true });
  const rand = prng(1);
  const small = Math.round(20_000 * scale);
  for (let i = 0; i < small; i++) {
    const dir = join(sourceDir, 'small', String(i % 100).padStart(2, '0'));
    if (i < 100) mkdirSync(dir, { recursive: true });
    const size = 1024 + (rand(4).readUInt32LE(0) % (63 * 1024));
    const body = i % 2 === 0 ? logText(size, rand) : rand(size);
    writeFileSync(join(dir, `file-${i}.${i % 2 === 0 ? 'txt' : 'bin'}`), body);
  }
  mkdirSync(join(sourceDir, 'large'), { recursive: true });
  const large = Math.max(1, Math.round(20 * scale));
  for (let i = 0; i < large; i++) {
    const path = join(sourceDir, 'large', `blob-${i}.bin`);
    const parts = [];
    for (let o = 0; o < 25; o++) parts.push(rand(MIB));
    writeFileSync(path, Buffer.concat(parts));
  }
  mkdirSync(join(sourceDir, 'logs'), { recursive: true });
  const logBytes = Math.round(227 * MIB * scale);
  const logFiles = 8;
  for (let i = 0; i < logFiles; i++)
    writeFileSync(join(sourceDir, 'logs', `app-${i}.log`), logText(Math.floor(logBytes / logFiles), rand));
  writeFileSync(join(dataDir, 'READY'), 'ok\n');
}

if (process.argv[2] === '--generate') {
  generate();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------

function listFiles(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    )) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push({ path: p, name: relative(dir, p), size: statSync(p).size });
    }
  };
  walk(dir);
  return out;
}

/** Single-core SHA-384 + AES-256-GCM over the same bytes, node:crypto, 256 KiB pieces. */
function ceiling() {
  const buf = prng(2)(8 * MIB);
  const key = Buffer.alloc(32, 7);
  const run = (n) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const h = createHash('sha384');
      const c = createCipheriv('aes-256-gcm', key, Buffer.alloc(12, i & 0xff));
      for (let o = 0; o < buf.length; o += 256 * 1024) {
        const piece = buf.subarray(o, o + 256 * 1024);
        h.update(piece);
        c.update(piece);
      }
      c.final();
      h.digest();
    }
    return (n * 8) / ((performance.now() - t0) / 1000);
  };
  run(4);
  return Math.max(run(32), run(32));
}

async function main() {
  if (process.env.BENCH_NO_BUILD !== '1') {
    execFileSync(
      'pnpm',
      ['exec', 'turbo', 'run', 'build', '--filter=@coffer/archive...', '--output-logs=errors-only'],
      {
        cwd: root,
        stdio: 'inherit',
      },
    );
  }
  if (!existsSync(join(dataDir, 'READY'))) {
    console.log(`generating data set (scale ${scale}) in ${relative(root, dataDir)} ...`);
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--generate'], {
      stdio: 'inherit',
      env: process.env,
    });
    if (r.status !== 0) throw new Error('data set generation failed');
  }
  const archiveDir = join(root, 'packages', 'archive');
  const requireFromArchive = createRequire(join(archiveDir, 'package.json'));
  const archive = await import(pathToFileURL(join(archiveDir, 'dist', 'index.js')).href);
  const crypto = await import(pathToFileURL(requireFromArchive.resolve('@coffer/crypto')).href);
  const objectstore = await import(pathToFileURL(requireFromArchive.resolve('@coffer/objectstore')).href);

  const files = listFiles(sourceDir);
  const total = files.reduce((a, f) => a + f.size, 0);
  const ceil = ceiling();
  const signer = crypto.generateSigner();
  const op = crypto.generateRecipient();
  const bg = crypto.generateRecipient();
  rmSync(destDir, { recursive: true, force: true });
  mkdirSync(destDir, { recursive: true });
  const store = objectstore.createFsStore({ root: destDir });

  let phase = 'seal';
  const phasePeak = { seal: 0, verify: 0 };
  const sampler = setInterval(() => {
    const mu = process.memoryUsage();
    if (mu.rss / MIB > phasePeak[phase])
      phasePeak[phase + 'Detail'] =
        `ab ${(mu.arrayBuffers / MIB).toFixed(0)} ext ${(mu.external / MIB).toFixed(0)} heap ${(mu.heapTotal / MIB).toFixed(0)}`;
    phasePeak[phase] = Math.max(phasePeak[phase], mu.rss / MIB);
  }, 25);
  // Seal: read ahead a few small files (reads run on libuv's pool while this thread hashes).
  const t0 = performance.now();
  const writer = await archive.createArchiveWriter({
    store,
    job: 'bench',
    runId: 'run-1',
    prevRunId: null,
    signerSecretKey: signer.secretKey,
    recipients: { operational: op.publicKey, breakGlass: bg.publicKey },
    source: { type: 'files', binding: 'bench', origin: relative(root, sourceDir) },
  });
  const AHEAD = 16;
  const pending = new Map();
  const start = (i) => {
    const f = files[i];
    if (f && f.size <= 4 * MIB && !pending.has(i)) pending.set(i, readFile(f.path));
  };
  for (let i = 0; i < AHEAD; i++) start(i);
  for (let i = 0; i < files.length; i++) {
    const f = files[i];
    start(i + AHEAD);
    let body;
    if (pending.has(i)) {
      body = await pending.get(i);
      pending.delete(i);
    } else {
      body = createReadStream(f.path, { highWaterMark: 4 * MIB });
    }
    await writer.addRecord({ name: f.name, body, size: f.size, metadata: { mode: 0o644 } });
  }
  const summary = await writer.finish();
  const sealSeconds = (performance.now() - t0) / 1000;

  phase = 'verify';
  const t1 = performance.now();
  const verdict = await archive.verifyRun(store, {
    job: 'bench',
    runId: 'run-1',
    secretKey: op.secretKey,
    pinSigner: summary.signer,
  });
  const verifySeconds = (performance.now() - t1) / 1000;
  if (!verdict.ok) throw new Error(`verify failed: ${verdict.failure.message}`);

  clearInterval(sampler);
  const peakRss = process.resourceUsage().maxRSS / 1024;
  const seal = total / MIB / sealSeconds;
  const verify = total / MIB / verifySeconds;
  const fmt = (x) => x.toFixed(0);
  const rows = [
    [
      'data set',
      `${files.length} files, ${fmt(total / MIB)} MiB (scale ${scale}); stored ${fmt(summary.storedBytes / MIB)} MiB in ${summary.shards} shards`,
    ],
    ['cores / workers', `${availableParallelism()} / ${process.env.COFFER_ARCHIVE_WORKERS ?? 'default'}`],
    ['ceiling (1 core SHA-384 + AES-256-GCM)', `${fmt(ceil)} MiB/s`],
    [
      'seal',
      `${fmt(seal)} MiB/s in ${sealSeconds.toFixed(2)} s = ${(seal / ceil).toFixed(2)} x ceiling (target >= 0.7)`,
    ],
    [
      'verify',
      `${fmt(verify)} MiB/s in ${verifySeconds.toFixed(2)} s = ${(verify / ceil).toFixed(2)} x ceiling (target >= 0.8)`,
    ],
    [
      'peak RSS',
      `${fmt(peakRss)} MiB (target < 256); sampled: seal ${fmt(phasePeak.seal)} (${phasePeak.sealDetail}), verify ${fmt(phasePeak.verify)} (${phasePeak.verifyDetail})`,
    ],
  ];
  for (const [k, v] of rows) console.log(`${k.padEnd(40)} ${v}`);
  rmSync(destDir, { recursive: true, force: true });
}

await main();
