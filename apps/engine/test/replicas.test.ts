import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { provisionKeys, startBuiltEngine } from './helpers/built-engine.ts';
import { bearer, http } from './helpers/engine.ts';

const GIB = 1024 * 1024 * 1024;

/** Sparse files: gigabytes to read, hash and seal, nothing to write first (zeros compress). */
function sparseSource(dir: string, files: number, bytes: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < files; i++) {
    const fd = openSync(join(dir, `blob-${i}.bin`), 'w');
    ftruncateSync(fd, bytes);
    closeSync(fd);
  }
}

const isEvent =
  (event: string, runId?: string) =>
  (l: Record<string, unknown>): boolean =>
    l.event === event && (runId === undefined || l.runId === runId);

t.test('SIGTERM drains a replica: its run is checkpointed and the other replica finishes it', async (t) => {
  // A hand-over that never comes fails the test instead of holding the suite.
  t.setTimeout(300_000);
  const dir = tempDir(t, 'coffer-replicas-');
  const keys = provisionKeys(dir);
  const source = join(dir, 'source');
  sparseSource(source, 2, GIB);
  const shared = join(dir, 'shared-destination');
  mkdirSync(shared);
  const db = await postgresUrl();
  const env = (name: string) => ({
    ...keys,
    ENGINE_DATA_DIR: join(dir, name),
    ENGINE_DATABASE_URL: db,
    ENGINE_DESTINATIONS: `shared=${shared}`,
    // An hour: a hand-over within this test can only come from a released lock, not an expired one.
    ENGINE_RUN_LEASE_SECONDS: '3600',
  });

  const a = await startBuiltEngine(t, env('replica-a'));
  const job = {
    id: 'big',
    cadenceSeconds: 86_400,
    source: { type: 'files', path: source },
    destinations: ['shared'],
  };
  t.equal((await http(`${a.url}/admin/jobs`, { headers: bearer(), body: job })).status, 200);
  const trigger = await http(`${a.url}/admin/trigger`, { headers: bearer(), body: { id: 'big' } });
  t.equal(trigger.status, 200, trigger.text);
  const runId = trigger.json().runId as string;
  // The second replica starts while the first holds the run: its start tick leaves the run alone.
  const [b] = await Promise.all([
    startBuiltEngine(t, env('replica-b')),
    a.waitLog(isEvent('run-checkpoint', runId)),
  ]);
  t.notOk(
    a.logs.some((l) => l.includes('"event":"run-ok"')),
    'the run is still in flight on the first replica (else grow the sparse source)',
  );
  a.child.kill('SIGTERM');
  t.equal(await a.exited, 0, 'the drained replica exits 0');
  const interrupted = a.logs.some((l) => l.includes('"event":"run-interrupted"') && l.includes(runId));
  t.ok(interrupted, 'it recorded the run as interrupted by its shutdown');
  // A run that ended before the signal leaves nothing to hand over: stop here, never wait.
  if (!interrupted) return;
  t.notOk(
    a.logs.some((l) => l.includes('"event":"run-ok"')),
    'it did not finish the run itself',
  );

  const resumed = await b.waitLog(isEvent('run-resumed', runId));
  t.equal(resumed.strikes, 0, 'a shutdown costs the run no strike');
  await b.waitLog(isEvent('run-ok', runId));
  const history = (await http(`${b.url}/admin/history?id=big`, { headers: bearer() })).json();
  t.same(
    history.runs.map((r: { runId: string; status: string }) => [r.runId, r.status]),
    [[runId, 'ok']],
    'one run, finished by the other replica',
  );
  const runs = join(shared, 'jobs', 'big', 'runs');
  t.same(readdirSync(runs), [runId], 'one archive in the shared destination');
  t.ok(existsSync(join(runs, runId, 'manifest.json')), 'sealed');
});
