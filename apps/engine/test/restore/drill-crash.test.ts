/**
 * "A crash mid-drill leaves no copy behind": a real engine process (`node apps/engine/src/main.ts`)
 * is killed with SIGKILL while a drill is writing its scratch copy, and started again on the same
 * data directory. The drill's namespace was recorded in the state store before it wrote; the next
 * start removes the scratch directory and forgets the namespace.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { repoRoot, tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http } from '../helpers/engine.ts';

const MAIN = join(repoRoot(), 'apps/engine/src/main.ts');
const FILES = 3000;

/** Files under `dir`, recursively (0 when it does not exist). */
function filesUnder(dir: string): number {
  if (!existsSync(dir)) return 0;
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((d) => d.isFile()).length;
  } catch {
    return 0; // a directory removed while it was read
  }
}

t.test('SIGKILL mid-drill, restart: the scratch copy is removed at the next start', async (t) => {
  const root = tempDir(t, 'coffer-drill-crash-');
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const src = join(root, 'source');
  for (let d = 0; d < 30; d++) mkdirSync(join(src, `d${d}`), { recursive: true });
  for (let i = 0; i < FILES; i++) writeFileSync(join(src, `d${i % 30}`, `f${i}.bin`), randomBytes(2048));
  const scratch = join(root, 'scratch');
  writeFileSync(join(root, 'connections.json'), JSON.stringify({ scratch: { files: scratch } }));
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: port,
    ENGINE_DATA_DIR: join(root, 'data'),
    ADMIN_TOKEN,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
    ENGINE_CONNECTIONS_FILE: join(root, 'connections.json'),
    ENGINE_LOG_LEVEL: 'warn',
  };
  const children: ChildProcess[] = [];
  t.teardown(() => {
    for (const c of children) c.kill('SIGKILL');
  });
  const start = async () => {
    const child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    children.push(child);
    const exit = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
    for (let i = 0; i < 300; i++) {
      try {
        if ((await fetch(`${url}/ready`)).ok) return { child, exit };
      } catch {}
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('engine did not start');
  };
  const api = (path: string, body?: unknown) =>
    http(`${url}/admin${path}`, { headers: bearer(), ...(body === undefined ? {} : { body }) });

  const first = await start();
  t.equal(
    (await api('/jobs', { id: 'tree', cadenceSeconds: 86_400, source: { type: 'files', path: src } })).status,
    200,
  );
  const runId = (await api('/trigger', { id: 'tree' })).json().runId as string;
  for (let i = 0; i < 600; i++) {
    const run = (await api('/history?id=tree')).json().runs.find((r: { runId: string }) => r.runId === runId);
    if (run?.status === 'ok') break;
    if (run && run.status !== 'running') throw new Error(`backup ${run.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  const drill = await api('/drill/run', { job: 'tree' });
  t.equal(drill.status, 202, drill.text);
  // Freeze the engine (SIGSTOP) while looking at the scratch directory; kill it (SIGKILL) once the
  // copy is partly written, else let it run a moment (as apply-crash.test.ts does).
  const db = new Database(join(root, 'data', 'state.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  const recorded = db.prepare<[], { key: string; value: string }>(
    "SELECT key, value FROM settings WHERE key LIKE 'drill.scratch.%'",
  );
  let atKill: { files: number; namespaces: Array<{ key: string; value: string }> } | null = null;
  for (let i = 0; i < 20_000 && atKill === null; i++) {
    first.child.kill('SIGSTOP');
    const files = filesUnder(scratch);
    if (files >= 50 && files < FILES) {
      first.child.kill('SIGKILL');
      atKill = { files, namespaces: recorded.all() };
    } else {
      first.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  t.equal(await first.exit, 'SIGKILL', 'the engine was killed mid-drill');
  t.ok(atKill, 'killed while the scratch copy was being written');
  t.equal(atKill?.namespaces.length, 1, 'the namespace was recorded before the writes');
  const ns = JSON.parse(atKill!.namespaces[0]!.value) as { files: string };
  t.ok(ns.files.startsWith(join(scratch, 'drill-')), 'a fresh directory under the scratch target');
  t.ok(filesUnder(ns.files) > 0, 'the crash left a partial copy behind');

  await start();
  for (let i = 0; i < 100 && existsSync(ns.files); i++) await new Promise((r) => setTimeout(r, 50));
  t.notOk(existsSync(ns.files), 'the next start removed the scratch copy');
  t.same(readdirSync(scratch), [], 'nothing else is left in the scratch directory');
  for (let i = 0; i < 100 && recorded.all().length > 0; i++) await new Promise((r) => setTimeout(r, 50));
  t.same(recorded.all(), [], 'and forgot the namespace');
  t.same(readdirSync(src).length, 30, 'the source is untouched');

  // A drill after the restart passes and leaves nothing.
  t.equal((await api('/drill/run', { job: 'tree' })).status, 202);
  let ev: { verdict?: string } | undefined;
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 50));
    ev = (await api('/drill-evidence?job=tree'))
      .json()
      .evidence.find((e: { verdict: string }) => e.verdict === 'pass');
    if (ev && filesUnder(scratch) === 0 && recorded.all().length === 0) break;
  }
  t.match(ev, { verdict: 'pass', records: FILES });
  t.same(readdirSync(scratch), [], 'a finished drill removes its copy');
});
