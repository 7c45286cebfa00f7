/**
 * Debian's Chromium for browser tests (playwright-core with `executablePath`). The path comes from
 * CHROMIUM_PATH, else `.test-services/chromium.env` written by `scripts/services/chromium.sh
 * start`. Outside CI a missing browser is installed and recorded once per process; with CI=true
 * (where scripts/test.sh set it up) a missing browser is a thrown error: a failure, never a skip.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readServiceEnv, repoRoot } from './tmp.ts';

let tried = false;

/** The Chromium executable to drive. Throws when there is none. */
export function chromiumPath(): string {
  const given = process.env.CHROMIUM_PATH || readServiceEnv('chromium')?.CHROMIUM_PATH;
  if (given && existsSync(given)) return given;
  if (process.env.CI !== 'true' && !tried) {
    tried = true;
    const script = join(repoRoot(), 'scripts', 'services', 'chromium.sh');
    for (const step of ['install', 'start']) spawnSync('bash', [script, step], { stdio: 'inherit' });
    const now = readServiceEnv('chromium')?.CHROMIUM_PATH;
    if (now && existsSync(now)) return now;
  }
  throw new Error(
    'Chromium not found: run scripts/services/chromium.sh install && start (Debian package chromium)',
  );
}
