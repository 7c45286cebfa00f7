/**
 * A hostile bucket cannot exhaust the engine (docs/archive-format.md "Read"): the real engine
 * (`apps/engine/dist/main.js`) runs with a 128 MiB heap and a 7 GiB address space; after a backup,
 * its `index.bin` is replaced by an 8 GiB sparse file. Restore verify and the dry run must answer
 * with a clear verification failure, and the engine must still be serving, where reading the index
 * whole would have killed it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { layout } from '@coffer/archive';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http } from '../helpers/engine.ts';

const root = repoRoot();
const MAIN = join(root, 'apps/engine/dist/main.js');
const RECOVER = join(root, 'apps/recover/dist/cli.js');

t.test('an 8 GiB index.bin: restore verify and dry run fail clearly, the engine keeps serving', async (t) => {
  const dir = tempDir(t, 'coffer-hostile-');
  const key = join(dir, 'break-glass.key');
  const kg = spawnSync(process.execPath, [RECOVER, 'keygen', '--out', key], { encoding: 'utf8' });
  t.equal(kg.status, 0, kg.stderr);
  const roots = join(dir, 'roots');
  mkdirSync(roots);
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const data = join(dir, 'data');
  const child = spawn(
    'sh',
    ['-c', `ulimit -v ${7 * 1024 * 1024} && exec "$0" --max-old-space-size=128 "$1"`, process.execPath, MAIN],
    {
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        HOST: '127.0.0.1',
        PORT: port,
        ENGINE_DATA_DIR: data,
        ADMIN_TOKEN,
        ENGINE_BREAK_GLASS_PUBLIC_KEY: `${key}.pub`,
        ENGINE_RESTORE_ROOTS: roots,
        ENGINE_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((r) =>
    child.on('exit', (code) => {
      exitCode = code;
      r();
    }),
  );
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
  const trig = await http(`${url}/admin/trigger`, { headers: bearer(), body: { id: 'demo' } });
  t.equal(trig.status, 200, trig.text);
  const runId = trig.json().runId as string;
  let status = 'running';
  for (let i = 0; i < 300 && status === 'running'; i++) {
    await new Promise((r) => setTimeout(r, 200));
    status =
      (await http(`${url}/admin/history?id=demo`, { headers: bearer() })).json().runs[0]?.status ?? 'running';
  }
  t.equal(status, 'ok', 'the backup ran');

  truncateSync(join(data, 'destination', ...layout.index('demo', runId).split('/')), 8 * 1024 ** 3);
  const body = { runId, target: { namespaceId: join(roots, 'out') } };
  const verify = await http(`${url}/admin/restore/verify`, { headers: bearer(), body });
  t.match(
    verify.json(),
    { ok: false, recordsVerified: 0, reason: 'run cannot be read back: record index tampered' },
    `restore verify: ${verify.text}`,
  );
  const plan = await http(`${url}/admin/restore`, { headers: bearer(), body });
  t.match(plan.json(), { ok: false, plannedWrites: 0 }, 'the dry run plans nothing');
  t.match(plan.text, /record index tampered/, 'and says why');
  t.equal(exitCode, undefined, 'the engine did not exit');
  t.ok((await fetch(`${url}/ready`)).ok, 'and still serves');
  child.kill('SIGTERM');
  await exited;
});
