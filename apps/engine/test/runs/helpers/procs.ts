/** Child-process helpers for the crash and scale-out tests (see driver.ts). */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { encodeKeyFile, generateRecipient, generateSigner } from '@coffer/crypto';

/** `files` random files of `mib` MiB each under `dir`. */
export function bigSource(dir: string, files: number, mib: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < files; i++) {
    const fd = openSync(join(dir, `blob-${i}.bin`), 'w');
    for (let m = 0; m < mib; m++) writeSync(fd, randomBytes(MIB));
    closeSync(fd);
  }
}

const DRIVER = join(import.meta.dirname, 'driver.ts');
const MIB = 1024 * 1024;

export function makeKeys(dir: string): { breakGlassSecret: Uint8Array } {
  mkdirSync(dir, { recursive: true });
  const signer = generateSigner();
  const op = generateRecipient();
  const bg = generateRecipient();
  writeFileSync(join(dir, 'signer.key'), encodeKeyFile('signer-secret', signer.secretKey), { mode: 0o600 });
  writeFileSync(join(dir, 'operational.key'), encodeKeyFile('recipient-secret', op.secretKey), {
    mode: 0o600,
  });
  writeFileSync(join(dir, 'breakglass.pub'), encodeKeyFile('recipient-public', bg.publicKey));
  return { breakGlassSecret: bg.secretKey };
}

type Line = Record<string, unknown>;

export function startDriver(env: Record<string, string>, onLine: (l: Line, child: ChildProcess) => void) {
  const child = spawn(process.execPath, [DRIVER], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Line[] = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let l: Line;
    try {
      l = JSON.parse(text);
    } catch {
      return;
    }
    lines.push(l);
    onLine(l, child);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, lines, exit };
}
