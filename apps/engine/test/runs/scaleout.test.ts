/**
 * Two engine processes on one PostgreSQL: the run lock lets exactly one of them run a job, and a
 * dead replica's run is resumed from its checkpoint by the other once its lease expires.
 */
import { join } from 'node:path';
import { listRuns, verifyRun } from '@coffer/archive';
import { createFsStore } from '@coffer/objectstore';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bigSource, makeKeys, startDriver } from './helpers/procs.ts';

t.test('two processes trigger one job at the same moment: exactly one runs it', async (t) => {
  const url = await postgresUrl();
  const root = tempDir(t, 'coffer-scale-');
  const source = join(root, 'source');
  bigSource(source, 2, 16);
  const { breakGlassSecret } = makeKeys(join(root, 'keys'));
  const common = {
    DRIVER_DB_URL: url,
    DRIVER_KEYS_DIR: join(root, 'keys'),
    DRIVER_DEST_DIR: join(root, 'dest'),
    DRIVER_SOURCE_DIR: source,
    DRIVER_JOB: 'shared',
    DRIVER_MODE: 'race',
    DRIVER_BARRIER_DIR: join(root, 'barrier'),
  };
  const a = startDriver({ ...common, DRIVER_DATA_DIR: join(root, 'a') }, () => undefined);
  const b = startDriver({ ...common, DRIVER_DATA_DIR: join(root, 'b') }, () => undefined);
  const [ea, eb] = await Promise.all([a.exit, b.exit]);
  t.equal(ea.code, 0);
  t.equal(eb.code, 0);
  const results = [a, b].map(
    (d) => (d.lines.find((l) => l.event === 'driver-trigger') as { result: { kind: string } }).result.kind,
  );
  t.same([...results].sort(), ['in-flight', 'started'], 'one started, the other was refused');
  // The ring as the process that ran the job saw it when its run had settled.
  const winner = results[0] === 'started' ? a : b;
  const done = (
    winner.lines.find((l) => l.event === 'driver-done') as { runs: { id: string; status: string }[] }
  ).runs;
  t.equal(done.length, 1, 'one run recorded');
  t.equal(done[0]?.status, 'ok');
  const store = createFsStore({ root: join(root, 'dest') });
  t.equal((await listRuns(store, 'shared')).length, 1, 'one archive');
  t.ok((await verifyRun(store, { job: 'shared', runId: done[0]!.id, secretKey: breakGlassSecret })).ok);
});

t.test('a dead replica’s run is resumed by another replica after its lease expires', async (t) => {
  const url = await postgresUrl();
  const root = tempDir(t, 'coffer-scale-');
  const source = join(root, 'source');
  bigSource(source, 4, 16);
  makeKeys(join(root, 'keys'));
  const common = {
    DRIVER_DB_URL: url,
    DRIVER_KEYS_DIR: join(root, 'keys'),
    DRIVER_DEST_DIR: join(root, 'dest'),
    DRIVER_SOURCE_DIR: source,
    DRIVER_JOB: 'handover',
    DRIVER_LEASE_SECONDS: '3',
    DRIVER_SHARD_SIZE: String(1024 * 1024),
  };
  let runId = '';
  const a = startDriver(
    { ...common, DRIVER_DATA_DIR: join(root, 'a'), DRIVER_MODE: 'trigger' },
    (l, child) => {
      if (l.event === 'run-started') runId = String(l.runId);
      if (l.event === 'run-checkpoint') child.kill('SIGKILL');
    },
  );
  t.equal((await a.exit).signal, 'SIGKILL');
  const b = startDriver(
    { ...common, DRIVER_DATA_DIR: join(root, 'b'), DRIVER_MODE: 'resume' },
    () => undefined,
  );
  t.equal((await b.exit).code, 0);
  t.ok(
    b.lines.some((l) => l.event === 'run-resumed' && l.runId === runId),
    'replica b resumed replica a’s run',
  );
  const done = (b.lines.find((l) => l.event === 'driver-done') as { runs: { id: string; status: string }[] })
    .runs;
  t.same(
    done.map((r) => [r.id, r.status]),
    [[runId, 'ok']],
  );
  t.equal((await listRuns(createFsStore({ root: join(root, 'dest') }), 'handover')).length, 1, 'one archive');
});
