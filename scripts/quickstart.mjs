#!/usr/bin/env node
// `pnpm start`: until the engine exists, creates a break-glass key pair for the operator with
// coffer-recover (outside any engine data dir) and prints what to do next.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keyDir = join(root, '.coffer-operator');
const keyFile = join(keyDir, 'break-glass.key');
mkdirSync(keyDir, { recursive: true, mode: 0o700 });
if (!existsSync(keyFile)) {
  const r = spawnSync(
    process.execPath,
    [join(root, 'apps/recover/dist/cli.js'), 'keygen', '--out', keyFile],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) process.exit(r.status ?? 1);
}
console.log(`break-glass key: ${keyFile} (public half: ${keyFile}.pub)`);
