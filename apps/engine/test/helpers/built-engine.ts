/**
 * The built engine (`dist/main.js`, what the image and the `coffer-engine` bin run) as a child
 * process on a free loopback port, for the scale-out tests and others that need the real program:
 * resolves once it logs `listening`,
 * keeps every log line, and is stopped with SIGTERM at the test's teardown.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { ADMIN_TOKEN } from './engine.ts';

export const BUILT_MAIN = join(import.meta.dirname, '..', '..', 'dist', 'main.js');

export interface BuiltEngine {
  url: string;
  child: ChildProcess;
  /** Every line the engine wrote on stdout (JSON log lines), in order. */
  logs: string[];
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** Resolves with the first log line for which `match` holds. */
  waitLog(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
}

export function startBuiltEngine(
  t: { teardown(fn: () => Promise<void>): void },
  env: Record<string, string>,
  /** Node options before the program (e.g. `--import` of a test hook). */
  nodeArgs: readonly string[] = [],
): Promise<BuiltEngine> {
  const child = spawn(process.execPath, [...nodeArgs, BUILT_MAIN], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', ADMIN_TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  const logs: string[] = [];
  const parsed: Record<string, unknown>[] = [];
  const waiters: {
    match: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    logs.push(line);
    let l: Record<string, unknown>;
    try {
      l = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    parsed.push(l);
    for (const w of [...waiters])
      if (w.match(l)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(l);
      }
  });
  const waitLog = (match: (l: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const seen = parsed.find(match);
      if (seen) return resolve(seen);
      waiters.push({ match, resolve });
      void exited.then((code) =>
        reject(new Error(`engine exited (${code}) before the awaited log line: ${stderr}`)),
      );
    });
  return waitLog((l) => l.event === 'listening' && typeof l.url === 'string').then((l) => ({
    url: l.url as string,
    child,
    logs,
    exited,
    waitLog,
  }));
}

/** One pair of engine keys and a break-glass public key, as an operator would provision them. */
export function provisionKeys(dir: string): Record<string, string> {
  const signer = join(dir, 'signer.key');
  const operational = join(dir, 'operational.key');
  const made = spawnSync(
    process.execPath,
    [BUILT_MAIN, 'keys', 'init', '--signer', signer, '--operational', operational],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (made.status !== 0) throw new Error(`keys init failed: ${made.stderr}`);
  const breakGlass = join(dir, 'break-glass.key.pub');
  writeFileSync(breakGlass, encodeKeyFile('recipient-public', generateRecipient().publicKey));
  return {
    ENGINE_SIGNER_KEY_FILE: signer,
    ENGINE_OPERATIONAL_KEY_FILE: operational,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: breakGlass,
  };
}
