import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The monorepo root (the folder holding pnpm-workspace.yaml). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'pnpm-workspace.yaml'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('testkit: repository root not found');
    dir = up;
  }
  return dir;
}

/** A fresh temporary directory, removed when the test `t` ends. */
export function tempDir(t: { teardown(fn: () => void): void }, prefix = 'coffer-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Reads `.test-services/<name>.env` (KEY=VALUE lines) written by `scripts/services/<name>.sh start`.
 * Returns null when the file does not exist.
 */
export function readServiceEnv(name: string): Record<string, string> | null {
  const file = join(repoRoot(), '.test-services', `${name}.env`);
  if (!existsSync(file)) return null;
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}
