// The engine applies its own Node flags (src/node-flags.ts): a real `node dist/main.js` process
// re-executes itself once with them, keeping its process id; an operator's own value is kept.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { ENGINE_NODE_FLAGS, missingNodeEnv, missingNodeFlags } from '../src/node-flags.ts';
import { ADMIN_TOKEN, freePort } from './helpers/engine.ts';

const MAIN = join(import.meta.dirname, '..', 'dist', 'main.js');

t.test(
  'missing settings: flags by name, from the command line or NODE_OPTIONS; env when unset',
  async (t) => {
    t.same(ENGINE_NODE_FLAGS, ['--max-semi-space-size=8', '--heap-growing-percent=30', '--expose-gc']);
    t.same(missingNodeFlags([], undefined), ENGINE_NODE_FLAGS);
    t.same(missingNodeFlags(['--max-semi-space-size=32'], undefined), [
      '--heap-growing-percent=30',
      '--expose-gc',
    ]);
    t.same(
      missingNodeFlags(['--max_semi_space_size=32', '--heap-growing-percent=50', '--expose_gc'], undefined),
      [],
      'underscore spelling',
    );
    t.same(
      missingNodeFlags(
        [],
        '--enable-source-maps --max-semi-space-size=4 --heap-growing-percent=10 --expose-gc',
      ),
      [],
    );
    t.same(missingNodeFlags(['--cpu-prof'], '--enable-source-maps'), ENGINE_NODE_FLAGS);
    t.same(missingNodeEnv({}), { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '524288' });
    t.same(
      missingNodeEnv({ MALLOC_ARENA_MAX: '8', MALLOC_MMAP_THRESHOLD_: '131072' }),
      {},
      "the operator's values are kept",
    );
    t.same(
      missingNodeEnv({ MALLOC_ARENA_MAX: '8' }),
      { MALLOC_MMAP_THRESHOLD_: '524288' },
      'each on its own',
    );
  },
);

async function startAndRead(
  t: Test,
  nodeArgs: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ argv: string[]; env: string[]; stderr: string }> {
  t.ok(existsSync(MAIN), 'apps/engine/dist/main.js exists (run pnpm build first)');
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, MAIN], {
    env: {
      PATH: process.env.PATH,
      ENGINE_DATA_DIR: tempDir(t),
      PORT: String(port),
      ADMIN_TOKEN,
      ...extraEnv,
    },
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
  // The process that answers is the one we started (same pid): its command line and environment now.
  const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const env = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0').filter(Boolean);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'graceful stop');
  return { argv, env, stderr };
}

t.test(
  'node dist/main.js runs with the engine settings, same process id',
  { skip: process.platform !== 'linux' },
  async (t) => {
    const { argv, env, stderr } = await startAndRead(t, []);
    t.ok(argv.includes('--max-semi-space-size=8'), `flags applied: ${argv.slice(1).join(' ')}`);
    t.ok(argv.includes('--heap-growing-percent=30'));
    t.ok(argv.includes('--expose-gc'));
    t.ok(env.includes('MALLOC_ARENA_MAX=2'), 'allocator setting applied');
    t.ok(env.includes('MALLOC_MMAP_THRESHOLD_=524288'), 'allocator setting applied');
    t.equal(argv.at(-1), MAIN, 'same program');
    t.equal(stderr, '', 'nothing on standard error (no warning)');
  },
);

t.test(
  "an operator's own values are kept (no re-execution)",
  { skip: process.platform !== 'linux' },
  async (t) => {
    const { argv, env } = await startAndRead(
      t,
      ['--max-semi-space-size=16', '--heap-growing-percent=50', '--expose-gc'],
      { MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '262144' },
    );
    t.ok(argv.includes('--max-semi-space-size=16'));
    t.notOk(argv.includes('--max-semi-space-size=8'));
    t.ok(env.includes('MALLOC_ARENA_MAX=4'));
    t.notOk(
      env.some((e) => e.startsWith('COFFER_ENGINE_NODE_FLAGS_APPLIED')),
      'nothing to add: not re-executed',
    );
  },
);
