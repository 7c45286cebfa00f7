// Black-box smoke test: starts `node apps/engine/dist/main.js` as a real process, configured only
// by environment variables, on a free loopback port, and exercises it over real HTTP.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { ADMIN_TOKEN, bearer, freePort, http } from './helpers/engine.ts';

const MAIN = join(import.meta.dirname, '..', 'dist', 'main.js');

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`engine exited with ${child.exitCode}`);
    try {
      const r = await fetch(`${url}/ready`);
      if (r.status === 200) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('engine never became ready');
}

t.test('dist/main.js starts from env vars, answers /ready, stops on SIGTERM', async (t) => {
  t.ok(existsSync(MAIN), 'apps/engine/dist/main.js exists (run pnpm build first)');
  const dataDir = tempDir(t);
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, ENGINE_DATA_DIR: dataDir, PORT: String(port), ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => {
    stdout += d;
  });
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, child);

  const ready = await http(`${url}/ready`);
  t.same(ready.json(), { status: 'ready', service: 'coffer-engine', version: '0.0.0' });
  t.equal((await http(`${url}/`)).status, 200);
  t.equal((await http(`${url}/nope`)).text, 'not found');
  t.equal((await http(`${url}/admin/health`)).json().ok, true);
  t.equal((await http(`${url}/admin/whoami`)).status, 401);
  const who = await http(`${url}/admin/whoami`, { headers: bearer() });
  t.equal(who.status, 200, `whoami with the admin token: ${who.text}`);
  const setup = await http(`${url}/admin/setup-state`, { headers: bearer() });
  t.equal(setup.status, 200);
  t.equal(setup.json().keysReady, false, 'no break-glass key configured');
  t.ok(existsSync(join(dataDir, 'keys', 'signer.key')), 'signer key created in the data dir');

  child.kill('SIGTERM');
  t.equal(await exited, 0, 'graceful stop exits 0');
  t.match(stdout, /"event":"stopped"/);
  t.equal(stderr, '');
  t.notOk(stdout.includes(ADMIN_TOKEN), 'the admin token never reaches the log');
});

t.test('bad configuration stops start-up with one line naming the variable', async (t) => {
  const r = spawnSync(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, ENGINE_DATA_DIR: tempDir(t), PORT: 'eighty' },
    encoding: 'utf8',
  });
  t.equal(r.status, 2);
  t.equal(r.stderr, 'coffer-engine: configuration error: PORT: must be an integer from 0 to 65535\n');
  const tok = spawnSync(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, ENGINE_DATA_DIR: tempDir(t), ADMIN_TOKEN: 'tiny-SECRET' },
    encoding: 'utf8',
  });
  t.equal(tok.status, 2);
  t.match(tok.stderr, /^coffer-engine: configuration error: ADMIN_TOKEN: /);
  t.notMatch(tok.stderr, /SECRET/);
});
