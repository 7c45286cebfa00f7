/**
 * "Nothing lost on a crash": a real engine process (`node apps/engine/src/main.ts`) is killed with
 * SIGKILL in the middle of a restore apply's writes and started again on the same data directory.
 * The apply is then `interrupted` (not resumed by itself), with the progress recorded before the
 * kill; an explicit resume passes the gates again, re-verifies, writes only what was not recorded
 * as written, and the restored tree equals the source byte for byte.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { repoRoot, tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http, startEngine } from '../helpers/engine.ts';

const MAIN = join(repoRoot(), 'apps/engine/src/main.ts');
const FILES = 4000;
const TMP = /^\..*\.coffer-[0-9a-f]{12}\.tmp$/;

t.test('SIGKILL mid-apply, restart: interrupted with its progress, resumed explicitly', async (t) => {
  const root = tempDir(t, 'coffer-apply-crash-');
  const bg = generateRecipient();
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', bg.publicKey));
  const src = join(root, 'source');
  for (let d = 0; d < 40; d++) mkdirSync(join(src, `d${d}`), { recursive: true });
  for (let i = 0; i < FILES; i++)
    writeFileSync(join(src, `d${i % 40}`, `f${i}.bin`), randomBytes(2048 + (i % 7) * 512));
  const roots = join(root, 'roots');
  mkdirSync(roots);
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: port,
    ENGINE_DATA_DIR: join(root, 'data'),
    ADMIN_TOKEN,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
    ENGINE_RESTORE_ROOTS: roots,
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
    (await api('/jobs', { id: 'many', cadenceSeconds: 86_400, source: { type: 'files', path: src } })).status,
    200,
  );
  const runId = (await api('/trigger', { id: 'many' })).json().runId as string;
  for (let i = 0; i < 600; i++) {
    const run = (await api('/history?id=many')).json().runs.find((r: { runId: string }) => r.runId === runId);
    if (run?.status === 'ok') break;
    if (run && run.status !== 'running') throw new Error(`backup ${run.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  const out = join(roots, 'out');
  const apply = await api('/restore', { runId, confirm: true, target: { namespaceId: out } });
  t.equal(apply.status, 202, apply.text);
  const applyId = apply.json().applyId as string;
  // Kill once at least one batch is recorded as written and the writes are still going. Polling
  // over HTTP raced the apply (on a loaded machine all 4,000 writes could land between two polls),
  // so the engine is frozen (SIGSTOP) while the test reads the apply's row from the state file the
  // engine itself persists, then let run again (SIGCONT) for a moment: the apply advances a little
  // per look, and the kill comes while it is frozen mid-write.
  const db = new Database(join(root, 'data', 'state.sqlite'), { readonly: true, fileMustExist: true });
  t.teardown(() => db.close());
  const rowOf = db.prepare<[string], { value: string }>('SELECT value FROM settings WHERE key = ?');
  let atKill: { recordedWritten: number; status: string } | null = null;
  for (let i = 0; i < 20_000 && atKill === null; i++) {
    first.child.kill('SIGSTOP');
    const raw = rowOf.get(`restore.apply.${applyId}`);
    const s =
      raw === undefined ? null : (JSON.parse(raw.value) as { recordedWritten: number; status: string });
    if (s !== null && s.status !== 'running')
      throw new Error(`the apply finished before the kill (${s.status})`);
    if (s !== null && s.recordedWritten >= 200) {
      first.child.kill('SIGKILL');
      atKill = s;
    } else {
      first.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  t.equal(await first.exit, 'SIGKILL', 'the engine was killed mid-apply');
  t.ok(atKill && atKill.recordedWritten < FILES, `killed with ${atKill?.recordedWritten} records recorded`);

  await start();
  const after = (await api(`/restore/applies?id=${applyId}`)).json();
  t.equal(after.status, 'interrupted', 'interrupted, not resumed by itself');
  t.equal(after.resumable, true);
  t.ok(after.recordedWritten >= (atKill?.recordedWritten ?? 0), 'the recorded progress survived the kill');
  t.ok(after.recordedWritten < FILES);
  const audit = (await api('/audit?action=restore-apply')).json();
  t.match(JSON.stringify(audit), /"status":"interrupted"/, 'the interruption is audited');

  const resume = await api('/restore/resume', { applyId });
  t.equal(resume.status, 202, resume.text);
  t.match(resume.json(), { ok: true, applyId, resumed: true, alreadyWritten: after.recordedWritten });
  t.equal((await api('/restore/resume', { applyId })).status, 409, 'a running apply is not resumed twice');
  let done: { status: string; attempts: number; receipt: Record<string, number | string> } | null = null;
  for (let i = 0; i < 1200; i++) {
    const s = (await api(`/restore/applies?id=${applyId}`)).json();
    if (s.status !== 'running') {
      done = s;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(done?.status, 'succeeded', JSON.stringify(done?.receipt ?? done));
  t.equal(done?.attempts, 2);
  t.equal(done?.receipt.alreadyDone, after.recordedWritten, 'recorded records were not written again');
  t.equal(
    Number(done?.receipt.written) + Number(done?.receipt.alreadyDone),
    FILES,
    'every record accounted for',
  );

  // The tree equals the source; the temporary files of writes the kill cut short were removed.
  const listed = readdirSync(out, { recursive: true, withFileTypes: true }).filter((d) => d.isFile());
  t.same(
    listed.filter((d) => TMP.test(d.name)).map((d) => d.name),
    [],
    'no temporary file of a cut write left',
  );
  const restored = listed.filter((d) => !TMP.test(d.name));
  t.equal(restored.length, FILES, 'every file restored');
  let same = 0;
  for (const d of restored) {
    const rel = join(d.parentPath, d.name).slice(out.length + 1);
    if (readFileSync(join(out, rel)).equals(readFileSync(join(src, rel)))) same++;
  }
  t.equal(same, FILES, 'byte for byte');
});

t.test('a graceful stop mid-apply leaves it interrupted (resumable), never cancelled', async (t) => {
  const root = tempDir(t, 'coffer-apply-stop-');
  const bg = generateRecipient();
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', bg.publicKey));
  const src = join(root, 'source');
  for (let d = 0; d < 20; d++) mkdirSync(join(src, `d${d}`), { recursive: true });
  // Enough records that the write phase lasts far longer than one poll (the engine runs in this
  // process: the polls are served between its records).
  for (let i = 0; i < 6000; i++) writeFileSync(join(src, `d${i % 20}`, `f${i}.bin`), randomBytes(1024));
  const roots = join(root, 'roots');
  mkdirSync(roots);
  const env = {
    ENGINE_DATA_DIR: join(root, 'data'),
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
    ENGINE_RESTORE_ROOTS: roots,
  };
  const e1 = await startEngine(t, env, { rateLimit: { max: 100_000, windowSeconds: 60 } });
  const api1 = (path: string, body?: unknown) =>
    http(`${e1.url}/admin${path}`, { headers: bearer(), ...(body === undefined ? {} : { body }) });
  await api1('/jobs', { id: 'small', cadenceSeconds: 86_400, source: { type: 'files', path: src } });
  const runId = (await api1('/trigger', { id: 'small' })).json().runId as string;
  await e1.app.runs.idle();
  const applyId = (
    await api1('/restore', { runId, confirm: true, target: { namespaceId: join(roots, 'o') } })
  ).json().applyId as string;
  for (let i = 0; i < 5000; i++) {
    const s = (await api1(`/restore/applies?id=${applyId}`)).json();
    if (s.status !== 'running') throw new Error(`the apply finished before the stop (${s.status})`);
    if (s.progress?.phase === 'write') break;
    await new Promise((r) => setTimeout(r, 1));
  }
  await e1.app.close();
  const e2 = await startEngine(t, env);
  const row = (await http(`${e2.url}/admin/restore/applies?id=${applyId}`, { headers: bearer() })).json();
  t.equal(row.status, 'interrupted', 'interrupted by the stop');
  t.equal(row.resumable, true);
  const cancel = await http(`${e2.url}/admin/restore/cancel`, { headers: bearer(), body: { applyId } });
  t.equal(cancel.json().status, 'cancelled', 'an interrupted apply can be cancelled instead');
  const again = await http(`${e2.url}/admin/restore/resume`, { headers: bearer(), body: { applyId } });
  t.equal(again.status, 409, 'a cancelled apply is not resumable');
});
