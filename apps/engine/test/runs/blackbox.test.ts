/**
 * The Quick start's promise, black-box: `node apps/engine/dist/main.js` with a break-glass public
 * key made by `coffer-recover keygen`; a job is created over HTTP and, with no trigger, the
 * scheduler runs it within its poll; GET /admin/history shows an `ok` run; `coffer-recover verify`
 * passes on the local destination with the break-glass secret key. SIGTERM stops it cleanly.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http } from '../helpers/engine.ts';

const root = repoRoot();
const MAIN = join(root, 'apps/engine/dist/main.js');
const RECOVER = join(root, 'apps/recover/dist/cli.js');

t.test('a new job runs on its own within the poll and coffer-recover verifies it', async (t) => {
  const dir = tempDir(t, 'coffer-bb-');
  const key = join(dir, 'break-glass.key');
  const kg = spawnSync(process.execPath, [RECOVER, 'keygen', '--out', key], { encoding: 'utf8' });
  t.equal(kg.status, 0, kg.stderr);
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const data = join(dir, 'data');
  const child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: port,
      ENGINE_DATA_DIR: data,
      ADMIN_TOKEN,
      ENGINE_BREAK_GLASS_PUBLIC_KEY: `${key}.pub`,
      ENGINE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/ready`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const job = {
    id: 'demo',
    cadenceSeconds: 3600,
    source: { type: 'files', path: join(root, 'apps/engine/sample') },
  };
  t.equal((await http(`${url}/admin/jobs`, { headers: bearer(), body: job })).status, 200);
  let run: { runId: string; status: string } | undefined;
  for (let i = 0; i < 300 && run?.status !== 'ok'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    run = (await http(`${url}/admin/history?id=demo`, { headers: bearer() })).json().runs[0];
    if (run && run.status !== 'running' && run.status !== 'ok') break;
  }
  t.equal(run?.status, 'ok', 'the scheduler ran the new job');
  const verify = spawnSync(
    process.execPath,
    [
      RECOVER,
      'verify',
      '--trust-unpinned-signer',
      '--from',
      join(data, 'destination'),
      '--run',
      run!.runId,
      '--key',
      key,
    ],
    { encoding: 'utf8' },
  );
  t.equal(verify.status, 0, `coffer-recover verify: ${verify.stdout}${verify.stderr}`);
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'graceful stop');
});
