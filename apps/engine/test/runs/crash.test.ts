/**
 * kill -9 mid-run, restart: the run resumes from its checkpoint without rewriting the shards the
 * checkpoint holds and without a second archive, and ends ok and verifiable with the break-glass key.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { layout, listRuns, verifyRun } from '@coffer/archive';
import { createFsStore } from '@coffer/objectstore';
import { openState } from '@coffer/state';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bigSource, makeKeys, startDriver } from './helpers/procs.ts';

const MIB = 1024 * 1024;

t.test(
  'kill -9 mid-run, restart: resumes from the checkpoint, one archive, finished shards untouched',
  async (t) => {
    const root = tempDir(t, 'coffer-crash-');
    const source = join(root, 'source');
    const dest = join(root, 'dest');
    const data = join(root, 'data');
    // 200 MiB of incompressible files, so shards are full and the run takes a while.
    bigSource(source, 8, 25);
    const { breakGlassSecret } = makeKeys(join(root, 'keys'));
    const env = {
      DRIVER_DATA_DIR: data,
      DRIVER_KEYS_DIR: join(root, 'keys'),
      DRIVER_DEST_DIR: dest,
      DRIVER_SOURCE_DIR: source,
      DRIVER_JOB: 'big',
    };

    let shardsAtKill = 0;
    let runId = '';
    const first = startDriver({ ...env, DRIVER_MODE: 'trigger' }, (l, child) => {
      if (l.event === 'run-started') runId = String(l.runId);
      if (l.event === 'run-checkpoint' && shardsAtKill === 0) {
        const n = Number((l.shardsDone as Record<string, number>).default ?? 0);
        if (n >= 2) {
          shardsAtKill = n;
          child.kill('SIGKILL');
        }
      }
    });
    const killed = await first.exit;
    t.equal(killed.signal, 'SIGKILL', 'the engine was killed mid-run');
    t.ok(shardsAtKill >= 2, `checkpoint held ${shardsAtKill} shards at the kill`);
    const before = new Map<number, { ino: number; mtimeMs: number; size: number }>();
    for (let i = 0; i < shardsAtKill; i++) {
      const s = statSync(join(dest, layout.shard('big', runId, i)));
      before.set(i, { ino: s.ino, mtimeMs: s.mtimeMs, size: s.size });
    }

    const second = startDriver({ ...env, DRIVER_MODE: 'resume' }, () => undefined);
    const resumed = await second.exit;
    t.equal(resumed.code, 0);
    t.ok(
      second.lines.some((l) => l.event === 'run-resumed' && l.runId === runId),
      'the same run resumed',
    );
    const done = second.lines.find((l) => l.event === 'driver-done') as {
      runs: { id: string; status: string; detail: { strikes: number } }[];
    };
    t.equal(done.runs.length, 1, 'one run in the history ring');
    t.equal(done.runs[0]?.id, runId);
    t.equal(done.runs[0]?.status, 'ok');
    t.equal(done.runs[0]?.detail.strikes, 1, 'the crash counted one strike');

    for (const [i, b] of before) {
      const s = statSync(join(dest, layout.shard('big', runId, i)));
      t.same({ ino: s.ino, mtimeMs: s.mtimeMs, size: s.size }, b, `shard ${i} untouched`);
    }
    const store = createFsStore({ root: dest });
    t.same(
      (await listRuns(store, 'big')).map((r) => r.runId),
      [runId],
      'one archive',
    );
    const verdict = await verifyRun(store, { job: 'big', runId, secretKey: breakGlassSecret });
    t.ok(verdict.ok, 'verifies with the break-glass key');
    t.equal(verdict.checks.records, 8);
    t.equal(verdict.checks.bytes, 200 * MIB);
    const state = await openState({ dataDir: data });
    t.equal(await state.checkpoints.get(runId), null, 'checkpoint dropped');
    await state.close();
  },
);
