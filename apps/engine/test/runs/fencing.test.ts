/**
 * Fenced run lock (issue 13 item 6): two engine processes on one PostgreSQL. Engine A is frozen
 * (SIGSTOP) inside its commit until its run lock expires; engine B takes the run over and commits
 * it; A is thawed (SIGCONT). Exactly one manifest is ever stored, A's attempt ends with the
 * lost-lock reason and records nothing, and the archive B committed verifies.
 */
import { join } from 'node:path';
import { listRuns, verifyRun } from '@coffer/archive';
import { createFsStore } from '@coffer/objectstore';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { REASON_LEASE_LOST } from '../../src/runs/reasons.ts';
import { bigSource, makeKeys, startDriver } from './helpers/procs.ts';

const LEASE_SECONDS = 3;

t.test('a holder paused past its lease never commits the run its successor committed', async (t) => {
  const url = await postgresUrl();
  const root = tempDir(t, 'coffer-fence-');
  const source = join(root, 'source');
  bigSource(source, 2, 4);
  const { breakGlassSecret } = makeKeys(join(root, 'keys'));
  const common = {
    DRIVER_DB_URL: url,
    DRIVER_KEYS_DIR: join(root, 'keys'),
    DRIVER_DEST_DIR: join(root, 'dest'),
    DRIVER_SOURCE_DIR: source,
    DRIVER_JOB: 'fenced',
    DRIVER_LEASE_SECONDS: String(LEASE_SECONDS),
    DRIVER_SHARD_SIZE: String(1024 * 1024),
  };
  let runId = '';
  let frozen: () => void = () => undefined;
  const frozenAt = new Promise<void>((resolve) => {
    frozen = resolve;
  });
  const a = startDriver(
    {
      ...common,
      DRIVER_DATA_DIR: join(root, 'a'),
      DRIVER_MODE: 'trigger',
      DRIVER_PAUSE_AT_COMMIT: '1',
      DRIVER_PAUSE_MS: '1500',
    },
    (l, child) => {
      if (l.event === 'run-started') runId = String(l.runId);
      if (l.event === 'driver-commit-point') {
        child.kill('SIGSTOP');
        frozen();
      }
    },
  );
  t.teardown(() => {
    if (a.child.exitCode === null && a.child.signalCode === null) {
      a.child.kill('SIGCONT');
      a.child.kill('SIGKILL');
    }
  });
  // An engine that ends before its commit point fails the test now, not at tap's timeout.
  const endedEarly = a.exit.then((e) => {
    throw new Error(`engine A exited (${e.code ?? e.signal}) before its commit point`);
  });
  endedEarly.catch(() => undefined);
  await Promise.race([frozenAt, endedEarly]);
  // A's last renewal was at most a third of the TTL before the freeze: wait the TTL and a margin.
  await new Promise((r) => setTimeout(r, (LEASE_SECONDS + 1.5) * 1000));

  const b = startDriver(
    { ...common, DRIVER_DATA_DIR: join(root, 'b'), DRIVER_MODE: 'resume' },
    () => undefined,
  );
  t.equal((await b.exit).code, 0, 'engine B settled the run');
  t.ok(
    b.lines.some((l) => l.event === 'run-resumed' && l.runId === runId),
    'engine B took the run over once A’s lease expired',
  );

  a.child.kill('SIGCONT');
  t.equal((await a.exit).code, 0, 'engine A went on and exited');

  const commits = [...a.lines, ...b.lines].filter((l) => l.event === 'driver-manifest-put');
  t.equal(commits.length, 1, 'exactly one manifest commit for the run');
  t.equal(
    b.lines.filter((l) => l.event === 'driver-manifest-put').length,
    1,
    'the commit is the holder’s (B)',
  );
  const stopped = a.lines.find((l) => l.event === 'run-attempt-stopped' && l.runId === runId);
  t.equal(stopped?.reason, REASON_LEASE_LOST, 'A’s attempt ended with the lost-lock reason');
  t.ok(
    a.lines.some((l) => l.event === 'run-lease-lost' && l.runId === runId),
    'A logged the loss of its run lock',
  );
  t.notOk(
    a.lines.some((l) => (l.event === 'run-ok' || l.event === 'run-failed') && l.runId === runId),
    'A recorded no outcome for a run it no longer held',
  );

  const done = (b.lines.find((l) => l.event === 'driver-done') as { runs: { id: string; status: string }[] })
    .runs;
  t.same(
    done.map((r) => [r.id, r.status]),
    [[runId, 'ok']],
    'one run, ok',
  );
  const store = createFsStore({ root: join(root, 'dest') });
  t.equal((await listRuns(store, 'fenced')).length, 1, 'one archive');
  const verdict = await verifyRun(store, { job: 'fenced', runId, secretKey: breakGlassSecret });
  t.ok(verdict.ok, 'the committed archive verifies (nothing of A overwrote it)');
});
