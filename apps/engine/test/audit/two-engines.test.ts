/**
 * The chain stays linear with two real engine processes (apps/engine/src/main.ts as child
 * processes) on one PostgreSQL (the testkit server), appending concurrently over HTTP: afterwards
 * verify is ok on both, seqs run 1..head without gaps or duplicates, and every write is there.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http } from '../helpers/engine.ts';

const MAIN = join(import.meta.dirname, '..', '..', 'src', 'main.ts');
// 30 each: the mutating-route rate limit (60 per minute per caller) is shared by both engines.
const PER_ENGINE = 30;

function startProcess(
  t: { teardown(fn: () => Promise<void>): void },
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: '0', ADMIN_TOKEN, ENGINE_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  );
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`engine exited early (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const l = JSON.parse(line) as { event?: string; url?: string };
        if (l.event === 'listening' && l.url) resolve({ url: l.url, child });
      } catch {
        // not a log line
      }
    });
  });
}

t.test('two engine processes on one PostgreSQL keep one linear chain', async (t) => {
  const db = await postgresUrl();
  const [a, b] = await Promise.all([
    startProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-a-'), ENGINE_DATABASE_URL: db }),
    startProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-b-'), ENGINE_DATABASE_URL: db }),
  ]);
  const auth = bearer();
  const writes: Array<Promise<number>> = [];
  for (let i = 0; i < PER_ENGINE; i++) {
    for (const [name, e] of [
      ['a', a],
      ['b', b],
    ] as const) {
      writes.push(
        http(`${e.url}/admin/jobs`, {
          headers: auth,
          body: { id: `${name}-${i}`, cadenceSeconds: 3600, source: { type: 'files', path: '/srv' } },
        }).then((r) => r.status),
      );
    }
  }
  const statuses = await Promise.all(writes);
  t.same([...new Set(statuses)], [200], 'every write applied');

  const va = (await http(`${a.url}/admin/audit/verify`, { headers: auth })).json();
  const vb = (await http(`${b.url}/admin/audit/verify`, { headers: auth })).json();
  t.equal(va.ok, true, 'verify ok on engine a');
  t.equal(vb.ok, true, 'verify ok on engine b');
  t.equal(va.headHash, vb.headHash, 'both see one head');

  const exported = (await http(`${a.url}/admin/audit/export`, { headers: auth })).json();
  const seqs = exported.events.map((e: { seq: number }) => e.seq);
  t.same(
    seqs,
    Array.from({ length: exported.headSeq }, (_, i) => i + 1),
    'seq 1..head, no gaps, no duplicates',
  );
  const upserts = exported.events.filter((e: { action: string }) => e.action === 'job-upsert');
  t.equal(upserts.length, 2 * PER_ENGINE, 'every write has its event');
  t.equal(new Set(upserts.map((e: { target: string }) => e.target)).size, 2 * PER_ENGINE);
});
