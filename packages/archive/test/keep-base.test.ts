/**
 * A base kept from a read-back (`verifyRun` with `keepBase`): it builds the job's next run like a
 * loaded one, and `isChunkedBaseCurrent` tells when a run or a prune has changed the pack indexes
 * it was built from.
 */
import t from 'tap';
import {
  createChunkedWriter,
  isChunkedBaseCurrent,
  loadChunkedBase,
  openRun,
  pruneChunked,
  type RecordInput,
  verifyRun,
} from '../src/index.ts';
import { deleteRun, JOB, pruneOptions, writeRun } from './chain-helpers.ts';
import { chunkedOptions, fsStore, keys, pseudoRandom, readAll, text } from './helpers.ts';

t.test(
  'a base kept from a read-back builds the next run, and is current until a run or a prune changes the pack indexes',
  async (t) => {
    const { store, root } = fsStore(t);
    const k = keys();
    const records = (big: number): RecordInput[] => [
      ...Array.from({ length: 30 }, (_, i) => ({
        name: `small/${i}`,
        body: text(2000 + i, i),
        change: `c${i}`,
      })),
      { name: 'big', body: pseudoRandom(200 * 1024, big), change: `big-${big}` },
    ];
    await writeRun(store, k, 'run-0001', null, records(1));
    const verify = (runId: string, keepBase?: boolean) =>
      verifyRun(store, {
        job: JOB,
        runId,
        secretKey: k.operational.secretKey,
        signerPublicKey: k.signer.publicKey,
        ...(keepBase === undefined ? {} : { keepBase }),
      });
    t.equal((await verify('run-0001')).base, undefined, 'no base unless asked for');
    const v1 = await verify('run-0001', true);
    t.ok(v1.ok);
    const base1 = v1.base!;
    t.equal(base1.job, JOB);
    t.equal(base1.runId, 'run-0001');
    t.equal(base1.records.size, 31);
    const loaded = await loadChunkedBase(store, {
      job: JOB,
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
    });
    t.equal(base1.keyId, loaded!.keyId, 'the same chunk key as loadChunkedBase opens');
    t.equal(base1.chunkCount, loaded!.chunkCount, 'and the same chunk map');
    t.same([...base1.records.values()], [...loaded!.records.values()], 'and the same records');
    t.equal(await isChunkedBaseCurrent(store, base1), true, 'current right after the read-back');

    // The next run on the kept base: unchanged records are referenced unread, the run verifies.
    const w = await createChunkedWriter(
      chunkedOptions(store, k, {
        runId: 'run-0002',
        prevRunId: 'run-0001',
        base: base1,
        writeRecovery: false,
      }),
    );
    for (const r of records(2)) await w.addRecord(r);
    const summary = await w.finish();
    t.equal(summary.unchangedRecords, 30);
    t.equal(await isChunkedBaseCurrent(store, base1), false, "stale once the run added its packs' index");
    const v2 = await verify('run-0002', true);
    t.ok(v2.ok);
    const got = await readAll(
      await openRun(store, { job: JOB, runId: 'run-0002', secretKey: k.breakGlass.secretKey }),
    );
    t.same(
      got.map((g) => Buffer.from(g.body).toString('base64')),
      records(2).map((r) => Buffer.from(r.body as Uint8Array).toString('base64')),
      'the run built on the kept base reads back exactly',
    );
    t.equal(await isChunkedBaseCurrent(store, v2.base!), true);

    // A prune that deletes run 1's dead packs rewrites the pack indexes: the kept base is stale.
    deleteRun(root, 'run-0001');
    const pruned = await pruneChunked(store, pruneOptions(k, { repackThreshold: 0 }));
    t.ok(pruned.complete && pruned.deletedPacks > 0, `the prune deleted ${pruned.deletedPacks} packs`);
    t.equal(await isChunkedBaseCurrent(store, v2.base!), false, 'stale after a prune');
    const again = await verify('run-0002', true);
    t.equal(await isChunkedBaseCurrent(store, again.base!), true, 'a new read-back is current again');

    // A base serves only its own job.
    await t.rejects(
      createChunkedWriter(chunkedOptions(store, k, { job: 'job-b', runId: 'run-0001', base: again.base! })),
      { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
    );
  },
);
