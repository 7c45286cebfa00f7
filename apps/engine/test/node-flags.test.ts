// The engine applies its own Node flags (src/node-flags.ts): a real `node dist/main.js` process
// re-executes itself once with them, keeping its process id; an operator's own value is kept.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { ENGINE_NODE_FLAGS, missingNodeFlags } from '../src/node-flags.ts';
import { ADMIN_TOKEN } from './helpers/engine.ts';

const MAIN = join(import.meta.dirname, '..', 'dist', 'main.js');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

t.test('missing flags: by name, from the command line or NODE_OPTIONS', async (t) => {
  t.same(ENGINE_NODE_FLAGS, ['--max-semi-space-size=8']);
  t.same(missingNodeFlags([], undefined), ['--max-semi-space-size=8']);
  t.same(missingNodeFlags(['--max-semi-space-size=32'], undefined), []);
  t.same(missingNodeFlags(['--max_semi_space_size=32'], undefined), [], 'underscore spelling');
  t.same(missingNodeFlags([], '--enable-source-maps --max-semi-space-size=4'), []);
  t.same(missingNodeFlags(['--cpu-prof'], '--enable-source-maps'), ['--max-semi-space-size=8']);
});

async function startAndRead(t: Test, nodeArgs: string[]): Promise<{ argv: string[]; stderr: string }> {
  t.ok(existsSync(MAIN), 'apps/engine/dist/main.js exists (run pnpm build first)');
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, MAIN], {
    env: { PATH: process.env.PATH, ENGINE_DATA_DIR: tempDir(t), PORT: String(port), ADMIN_TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`engine exited with ${child.exitCode}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/ready`)).status === 200) break;
    } catch {}
    if (i > 600) throw new Error('engine never became ready');
    await new Promise((r) => setTimeout(r, 50));
  }
  // The process that answers is the one we started (same pid): its command line now.
  const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'graceful stop');
  return { argv, stderr };
}

t.test(
  'node dist/main.js runs with the engine flags, same process id',
  { skip: process.platform !== 'linux' },
  async (t) => {
    const { argv, stderr } = await startAndRead(t, []);
    t.ok(argv.includes('--max-semi-space-size=8'), `flags applied: ${argv.slice(1).join(' ')}`);
    t.equal(argv.at(-1), MAIN, 'same program');
    t.equal(stderr, '', 'nothing on standard error (no warning)');
  },
);

t.test(
  "an operator's own value is kept (no re-execution)",
  { skip: process.platform !== 'linux' },
  async (t) => {
    const { argv } = await startAndRead(t, ['--max-semi-space-size=16']);
    t.ok(argv.includes('--max-semi-space-size=16'));
    t.notOk(argv.includes('--max-semi-space-size=8'));
  },
);
