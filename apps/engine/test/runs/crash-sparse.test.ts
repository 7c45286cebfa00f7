/**
 * Sparse checkpoints (the default spacing saves at most every few seconds, not after every shard):
 * kill -9 well after the last save, with shards on disk that the checkpoint does not hold. The
 * restart resumes from that checkpoint: the shards it holds are never rewritten, only the
 * un-checkpointed tail is sealed again, and the run ends ok with one archive.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { layout, listRuns, verifyRun } from '@coffer/archive';
import { createFsStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bigSource, makeKeys, startDriver } from './helpers/procs.ts';

const MIB = 1024 * 1024;

t.test('kill -9 past the last checkpoint: resume re-does only the un-checkpointed tail', async (t) => {
  const root = tempDir(t, 'coffer-crash-sparse-');
  const source = join(root, 'source');
  const dest = join(root, 'dest');
  bigSource(source, 6, 16);
  const { breakGlassSecret } = makeKeys(join(root, 'keys'));
  const env = {
    DRIVER_DATA_DIR: join(root, 'data'),
    DRIVER_KEYS_DIR: join(root, 'keys'),
    DRIVER_DEST_DIR: dest,
    DRIVER_SOURCE_DIR: source,
    DRIVER_JOB: 'sparse',
    DRIVER_SHARD_SIZE: String(MIB),
    // Far apart: after the first save (at once) no other save lands before the kill.
    DRIVER_CHECKPOINT_MS: '600000',
  };
  let runId = '';
  let held = 0;
  let onDisk = 0;
  const shardsDir = () => join(dest, layout.shardsPrefix('sparse', runId));
  const count = () => {
    try {
      return readdirSync(shardsDir()).filter((f) => f.endsWith('.bin')).length;
    } catch {
      return 0;
    }
  };
  const first = startDriver({ ...env, DRIVER_MODE: 'trigger' }, (l, child) => {
    if (l.event === 'run-started') runId = String(l.runId);
    if (l.event === 'run-checkpoint' && held === 0) {
      held = Number((l.shardsDone as Record<string, number>).default ?? 0);
      // Let several more shards land past the checkpoint, then crash.
      const poll = setInterval(() => {
        const n = count();
        if (n >= held + 4 || child.exitCode !== null) {
          clearInterval(poll);
          onDisk = n;
          child.kill('SIGKILL');
        }
      }, 5);
    }
  });
  const killed = await first.exit;
  t.equal(killed.signal, 'SIGKILL', 'killed mid-run');
  t.ok(held >= 1, `the checkpoint held ${held} shard(s)`);
  t.ok(onDisk >= held + 4, `${onDisk} shards on disk at the kill, more than the checkpoint holds`);
  const savesBefore = first.lines.filter((l) => l.event === 'run-checkpoint').length;
  t.equal(savesBefore, 1, 'one save before the kill (sparse checkpoints)');
  const before = new Map<number, { ino: number; mtimeMs: number }>();
  for (let i = 0; i < held; i++) {
    const s = statSync(join(dest, layout.shard('sparse', runId, i)));
    before.set(i, { ino: s.ino, mtimeMs: s.mtimeMs });
  }

  const second = startDriver({ ...env, DRIVER_MODE: 'resume' }, () => undefined);
  t.equal((await second.exit).code, 0);
  t.ok(
    second.lines.some((l) => l.event === 'run-resumed' && l.runId === runId),
    'the same run resumed',
  );
  for (const [i, b] of before) {
    const s = statSync(join(dest, layout.shard('sparse', runId, i)));
    t.same({ ino: s.ino, mtimeMs: s.mtimeMs }, b, `checkpointed shard ${i} untouched`);
  }
  const store = createFsStore({ root: dest });
  t.same(
    (await listRuns(store, 'sparse')).map((r) => r.runId),
    [runId],
    'one archive',
  );
  const verdict = await verifyRun(store, { job: 'sparse', runId, secretKey: breakGlassSecret });
  t.ok(verdict.ok, 'verifies with the break-glass key');
  t.equal(verdict.checks.records, 6);
  t.equal(verdict.checks.bytes, 96 * MIB);
});
