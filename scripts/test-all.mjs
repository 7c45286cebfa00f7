#!/usr/bin/env node
// Runs every package's tap tests in one tap run (tap spreads the files over the cores) and ends
// with the plain summary line CI reads: `N passed, N failed` (assertions, summed over all packages).
// Extra arguments are passed to tap (for example a file or --grep).
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
mkdirSync(join(root, '.tap'), { recursive: true });
const log = createWriteStream(join(root, '.tap', 'last-run.tap'));
const tapBin = join(root, 'node_modules', '.bin', 'tap');
const child = spawn(tapBin, ['--reporter=tap', ...process.argv.slice(2)], {
  cwd: root,
  stdio: ['ignore', 'pipe', 'inherit'],
  env: process.env,
});
let tail = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  log.write(chunk);
  tail = (tail + chunk.toString('utf8')).slice(-4096);
});
child.on('close', (code, signal) => {
  log.end();
  // tap's TAP reporter closes with a line such as `# { total: 12, pass: 11, fail: 1, skip: 0 }`.
  const m = /# \{ total: (\d+)(?:, pass: (\d+))?(?:, fail: (\d+))?(?:, skip: (\d+))?/.exec(tail);
  const passed = m ? Number(m[2] ?? 0) : 0;
  let failed = m ? Number(m[3] ?? 0) : 0;
  const skipped = m ? Number(m[4] ?? 0) : 0;
  if ((code !== 0 || signal) && failed === 0) failed = 1; // a crashed runner is never green
  process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  process.exit(failed > 0 || code !== 0 ? 1 : 0);
});
