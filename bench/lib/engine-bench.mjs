// Shared set-up of the benchmarks that drive a running engine (bench/backup.mjs,
// bench/restore.mjs): the data set with its page cache warmed, and an engine process on a random
// loopback port with a fresh data dir, an admin token and a break-glass public key.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureDataSet } from '../archive-dataset.mjs';

export const MIB = 1024 * 1024;
export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const chunk = Buffer.allocUnsafe(4 * MIB);
/** Files and bytes under a directory; `warm` reads every file once (page cache). */
export function tally(dir, warm = false) {
  let bytes = 0;
  let files = 0;
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        bytes += statSync(p).size;
        files++;
        if (warm) {
          const fd = openSync(p, 'r');
          while (readSync(fd, chunk, 0, chunk.length, null) > 0);
          closeSync(fd);
        }
      }
    }
  };
  walk(dir);
  return { bytes, files };
}

/**
 * The shared data set (bench/archive-dataset.mjs: the same bytes bench:archive seals; ~1 GiB at
 * scale 1, as ARCHITECTURE.md "Benchmarks" describes), generated once, with every file read once so that
 * whichever tool goes first does not pay the cold reads for the other.
 */
export function warmDataSet(scale) {
  const { sourceDir } = ensureDataSet(Number(scale));
  const { bytes: totalBytes, files } = tally(sourceDir, true);
  return { sourceDir, totalBytes, files };
}

/**
 * Starts `node <engineMain>` with a fresh data dir under `work` and waits for GET /ready. `env`
 * adds variables (e.g. ENGINE_RESTORE_ROOTS). Returns the process, its URL, an `api(path, body?)`
 * caller with the admin token, the engine's environment, `stop()` (SIGTERM) and `exit` (resolves
 * when it has exited) and `breakGlassKeyFile` (the secret half of the engine's break-glass key).
 */
export async function startEngine({ work, engineMain, engineArgs = [], env = {} }) {
  if (!existsSync(engineMain)) throw new Error('run `pnpm build` first');
  const requireFromEngine = createRequire(join(root, 'apps/engine/package.json'));
  const crypto = await import(pathToFileURL(requireFromEngine.resolve('@coffer/crypto')).href);
  const bg = crypto.generateRecipient();
  writeFileSync(join(work, 'bg.pub'), crypto.encodeKeyFile('recipient-public', bg.publicKey));
  // The break-glass secret half, for benches that time `coffer-recover` (never given to the engine).
  const breakGlassKeyFile = join(work, 'bg.key');
  writeFileSync(breakGlassKeyFile, crypto.encodeKeyFile('recipient-secret', bg.secretKey), { mode: 0o600 });

  const token = randomBytes(24).toString('hex');
  const port = String(30000 + Math.floor(Math.random() * 20000));
  const url = `http://127.0.0.1:${port}`;
  const engineData = join(work, 'engine');
  const engineEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: port,
    ENGINE_DATA_DIR: engineData,
    ADMIN_TOKEN: token,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(work, 'bg.pub'),
    // The benches poll several times a second: at `info` every poll would add request log
    // lines that no user's run produces.
    ENGINE_LOG_LEVEL: { ...process.env }.BENCH_ENGINE_LOG_LEVEL ?? 'warn',
    ...env,
  };
  const engine = spawn(process.execPath, [...engineArgs, engineMain], {
    env: engineEnv,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  let stopping = false;
  const exit = new Promise((r) => engine.once('exit', r));
  // An engine that dies under a bench says how (the bench's next request then fails).
  engine.once('exit', (code, signal) => {
    if (!stopping) console.error(`engine exited unexpectedly: code ${code}, signal ${signal}`);
  });
  const stop = () => {
    stopping = true;
    engine.kill('SIGTERM');
  };
  process.on('exit', stop);
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${url}/ready`)).ok) break;
    } catch {}
    if (i > 300) throw new Error('engine did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  // One connection per request (agent: false): a bench leaves the engine idle for long stretches
  // (the peer's turn), and a pooled keep-alive socket the server closed meanwhile fails the next
  // request ("other side closed") with nothing wrong on either side.
  const api = (path, body) =>
    new Promise((resolve, reject) => {
      const data = body ? JSON.stringify(body) : null;
      const req = httpRequest(
        `${url}/admin${path}`,
        {
          method: body ? 'POST' : 'GET',
          agent: false,
          headers: {
            authorization: `Bearer ${token}`,
            ...(data
              ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }
              : {}),
          },
        },
        (res) => {
          const parts = [];
          res.on('data', (c) => parts.push(c));
          res.on('end', () => {
            try {
              resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(parts).toString('utf8')) });
            } catch (e) {
              reject(e);
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(data ?? undefined);
    });
  return { engine, engineEnv, url, engineData, api, stop, exit, breakGlassKeyFile };
}
