// coffer-recover applies its own Node settings (src/node-flags.ts): the real CLI re-executes
// itself once with them, keeping its process id and its stdin; a user's own value is kept.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { missingRecoverFlags, RECOVER_NODE_ENV, RECOVER_NODE_FLAGS } from '../src/node-flags.ts';
import { buildFixture } from './fixture.ts';
import { APP_ROOT, CLI_SRC, cliArgs } from './helpers.ts';

t.test('missing flags: by name, either spelling, from the command line or NODE_OPTIONS', async (t) => {
  t.same(RECOVER_NODE_FLAGS, ['--max-semi-space-size=8']);
  t.same(RECOVER_NODE_ENV, { MALLOC_ARENA_MAX: '2' });
  t.same(missingRecoverFlags([], undefined), RECOVER_NODE_FLAGS);
  t.same(missingRecoverFlags(['--max_semi_space_size=32'], undefined), [], 'underscore spelling');
  t.same(missingRecoverFlags([], '--enable-source-maps --max-semi-space-size=4'), []);
  t.same(missingRecoverFlags(['--cpu-prof'], '--enable-source-maps'), RECOVER_NODE_FLAGS);
});

/** Starts the CLI with stdin held open, reads its command line and environment once it carries
 * the mark (re-executed) or after a while, then feeds stdin and waits for the exit. */
async function runHeld(
  args: string[],
  input: string,
  nodeArgs: string[] = [],
  env: Record<string, string> = {},
): Promise<{ argv: string[]; environ: string[]; code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...nodeArgs, CLI_SRC, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    cwd: APP_ROOT,
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  let argv: string[] = [];
  let environ: string[] = [];
  // The key is read from stdin, so until it is written the process waits (in whichever image).
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 50));
    // The environment first: once it shows the mark, the command line read after it is the new one.
    environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0').filter(Boolean);
    argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    if (environ.includes('COFFER_RECOVER_NODE_FLAGS_APPLIED=1') || i >= 60) break;
  }
  child.stdin.end(input);
  return { argv, environ, code: await exited, stderr };
}

t.test(
  'the CLI runs with its settings, same process id, stdin intact',
  { skip: process.platform !== 'linux' },
  async (t) => {
    const f = await buildFixture(tempDir(t, 'coffer-recover-flags-'));
    const args = cliArgs('verify', { from: f.bucket, run: 'r1', key: '-' }, '--trust-unpinned-signer');
    const key = readFileSync(f.breakGlassKey, 'utf8');
    const held = await runHeld(args, key);
    t.ok(held.argv.includes('--max-semi-space-size=8'), `flags applied: ${held.argv.slice(1, 3).join(' ')}`);
    t.ok(held.environ.includes('MALLOC_ARENA_MAX=2'), 'allocator setting applied');
    t.equal(held.argv[held.argv.indexOf(CLI_SRC) + 1], 'verify', 'same program and arguments');
    t.equal(held.code, 0, `verified with the key piped before the re-execution: ${held.stderr}`);

    const own = await runHeld(args, key, ['--max-semi-space-size=16'], { MALLOC_ARENA_MAX: '4' });
    t.ok(own.argv.includes('--max-semi-space-size=16'), "the user's own flag is kept");
    t.notOk(own.argv.includes('--max-semi-space-size=8'));
    t.ok(own.environ.includes('MALLOC_ARENA_MAX=4'));
    t.notOk(
      own.environ.some((e) => e.startsWith('COFFER_RECOVER_NODE_FLAGS_APPLIED')),
      'nothing missing: not re-executed',
    );
    t.equal(own.code, 0);
  },
);
