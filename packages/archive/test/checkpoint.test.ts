/** Checkpoint export / resume, and the writer's refusals (truncated, misordered, divergent). */
import { generateRecipient, generateSigner } from '@coffer/crypto';
import t from 'tap';
import {
  createArchiveWriter,
  openRun,
  type RecordInput,
  resumeArchiveWriter,
  verifyRun,
} from '../src/index.ts';
import { fsStore, keys, pseudoRandom, readAll, sealRun, text, writerOptions } from './helpers.ts';

function records(): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 60; i++)
    out.push({ name: `r/${i}`, body: i % 3 === 0 ? text(9_000 + i, i) : pseudoRandom(7_000 + i * 13, i) });
  out.splice(20, 0, { name: 'large', body: pseudoRandom(300_000, 99) });
  return out;
}

async function* pieces(b: Uint8Array) {
  for (let o = 0; o < b.length; o += 10_000) yield b.subarray(o, o + 10_000);
}

t.test('checkpoint export / resume equals an uninterrupted run (resume inside a record)', async (t) => {
  const k = keys();
  const all = records();
  const { store: plainStore } = fsStore(t);
  await sealRun(plainStore, k, all, { shardSize: 64 * 1024 });
  const expected = (
    await readAll(await openRun(plainStore, { runId: 'run-0001', secretKey: k.operational.secretKey }))
  ).map((r) => [r.entry.name, r.entry.sha384, r.entry.shard, r.entry.offset]);

  const { store } = fsStore(t);
  let checkpoint: Uint8Array | null = null;
  let shardsSeen = 0;
  const w = await createArchiveWriter(
    writerOptions(store, k, {
      shardSize: 64 * 1024,
      onShard: async () => {
        shardsSeen++;
        // Keep the checkpoint taken inside the large record (shard 4 or so).
        if (shardsSeen === 5) checkpoint = await w.exportCheckpoint();
      },
    }),
  );
  // Simulate a crash: feed records up to and partway into the large one, then stop.
  for (const r of all.slice(0, 20)) await w.addRecord(r);
  const large = all[20]!.body as Uint8Array;
  await t.rejects(
    w.addRecord({
      name: 'large',
      body: (async function* () {
        yield* pieces(large.subarray(0, 250_000));
        throw new Error('source connection reset');
      })(),
    }),
    { code: 'ERR_ARCHIVE_SOURCE_READ' },
  );
  await w.abort();
  t.ok(checkpoint, 'a checkpoint was exported');

  const { writer, resume } = await resumeArchiveWriter(checkpoint!, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  t.equal(resume.job, 'job-a');
  t.equal(resume.recordsDone, 20);
  t.equal(resume.lastRecordName, 'r/19');
  t.equal(resume.partial?.name, 'large');
  t.ok(resume.partial!.bytesDone > 0 && resume.partial!.bytesDone < 300_000);
  for (const r of all.slice(resume.recordsDone))
    await writer.addRecord({ ...r, body: pieces(r.body as Uint8Array) });
  await writer.finish();
  const got = (
    await readAll(await openRun(store, { runId: 'run-0001', secretKey: k.breakGlass.secretKey }))
  ).map((r) => [r.entry.name, r.entry.sha384, r.entry.shard, r.entry.offset]);
  t.same(got, expected);
  t.equal((await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey })).ok, true);
});

t.test('resume refuses a different record or changed bytes mid-record', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  let checkpoint: Uint8Array | null = null;
  const w = await createArchiveWriter(
    writerOptions(store, k, {
      shardSize: 64 * 1024,
      onShard: async () => {
        checkpoint ??= await w.exportCheckpoint();
      },
    }),
  );
  await w.addRecord({ name: 'big', body: pseudoRandom(200_000, 5) });
  await w.abort();
  const opts = { store, signerSecretKey: k.signer.secretKey, operationalSecretKey: k.operational.secretKey };
  const a = await resumeArchiveWriter(checkpoint!, opts);
  t.equal(a.resume.partial?.name, 'big');
  await t.rejects(a.writer.addRecord({ name: 'other', body: new Uint8Array(3) }), {
    code: 'ERR_ARCHIVE_RESUME_DIVERGENT',
    reason: 'resume state divergent (mid-record resume refused)',
  });
  const b = await resumeArchiveWriter(checkpoint!, opts);
  await t.rejects(b.writer.addRecord({ name: 'big', body: pseudoRandom(200_000, 6) }), {
    code: 'ERR_ARCHIVE_RESUME_DIVERGENT',
  });
  const c = await resumeArchiveWriter(checkpoint!, opts);
  await t.rejects(c.writer.finish(), { code: 'ERR_ARCHIVE_RESUME_DIVERGENT' });
  const d = await resumeArchiveWriter(checkpoint!, opts);
  await d.writer.addRecord({ name: 'big', body: pseudoRandom(200_000, 5) });
  await d.writer.finish();
  t.equal((await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey })).ok, true);
});

t.test('an unreadable checkpoint gives the spec reason', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  const w = await createArchiveWriter(writerOptions(store, k));
  await w.addRecord({ name: 'a', body: new Uint8Array(10) });
  const cp = await w.exportCheckpoint();
  const reason = 'checkpoint unwrap failed (resume state unreadable; signer may have rotated)';
  const rotated = generateSigner();
  await t.rejects(
    resumeArchiveWriter(cp, {
      store,
      signerSecretKey: rotated.secretKey,
      operationalSecretKey: k.operational.secretKey,
    }),
    {
      code: 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE',
      reason,
    },
  );
  await t.rejects(
    resumeArchiveWriter(cp, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: generateRecipient().secretKey,
    }),
    { code: 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE', reason },
  );
  const bad = new Uint8Array(cp);
  bad[bad.length - 5] = bad[bad.length - 5]! ^ 1;
  await t.rejects(
    resumeArchiveWriter(bad, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    }),
    {
      code: 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE',
    },
  );
  await t.rejects(
    resumeArchiveWriter(new Uint8Array(5), {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    }),
    { code: 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE' },
  );
});

t.test('refuses to sign a truncated archive', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  const w = await createArchiveWriter(
    writerOptions(store, k, {
      shardSize: 64 * 1024,
      onShard: async (e) => {
        if (e.index === 1) await store.delete('jobs/job-a/runs/run-0001/shards/000000.bin');
      },
    }),
  );
  await w.addRecord({ name: 'a', body: pseudoRandom(300_000, 1) });
  await t.rejects(w.finish(), {
    code: 'ERR_ARCHIVE_TRUNCATED',
    reason: 'shard enumeration incomplete (refused to sign a truncated archive)',
    object: 'jobs/job-a/runs/run-0001/shards/000000.bin',
  });
  t.equal(await store.head('jobs/job-a/runs/run-0001/manifest.json'), null, 'nothing signed');
  t.equal(await store.head('jobs/job-a/runs/run-0001/manifest.sig'), null);
});

t.test('refuses to seal a misordered archive (shard id overflow)', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  const w = await createArchiveWriter(writerOptions(store, k, { shardSize: 64 * 1024, maxShards: 2 }));
  await t.rejects(w.addRecord({ name: 'a', body: pseudoRandom(300_000, 1) }), {
    code: 'ERR_ARCHIVE_SHARD_ID_OVERFLOW',
    reason: 'shard id overflow (refused to seal a misordered archive)',
  });
  await t.rejects(w.finish(), { code: 'ERR_ARCHIVE_SHARD_ID_OVERFLOW' });
  // Shards handed to the store before the refusal may still be landing: abort settles them, as a
  // caller does after a failed writer (else the temporary directory can vanish under a write).
  await w.abort();
  t.equal(await store.head('jobs/job-a/runs/run-0001/manifest.json'), null);
});

t.test('writer misuse and sealed runs', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  await sealRun(store, k, [{ name: 'a', body: new Uint8Array(1) }]);
  await t.rejects(createArchiveWriter(writerOptions(store, k)), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' });
  await t.rejects(createArchiveWriter(writerOptions(store, k, { job: '../x' })), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await t.rejects(createArchiveWriter(writerOptions(store, k, { runId: 'a/b' })), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await t.rejects(
    createArchiveWriter(
      writerOptions(store, k, {
        runId: 'r2',
        recipients: { operational: k.operational.publicKey, breakGlass: k.operational.publicKey },
      }),
    ),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
  );
  const w = await createArchiveWriter(writerOptions(store, k, { runId: 'r2' }));
  await t.rejects(w.addRecord({ name: '', body: new Uint8Array(0) }), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await t.rejects(w.addRecord({ name: 'bad\ud800', body: new Uint8Array(0) }), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await w.addRecord({ name: 'ok', body: new Uint8Array(0) });
  await w.finish();
  await t.rejects(w.addRecord({ name: 'late', body: new Uint8Array(0) }), {
    code: 'ERR_ARCHIVE_INVALID_STATE',
  });
  await t.rejects(w.finish(), { code: 'ERR_ARCHIVE_INVALID_STATE' });
});

t.test(
  'finish: a failed index or signature put commits nothing (no manifest), index failure named first',
  async (t) => {
    const k = keys();
    for (const failing of [['index.bin'], ['manifest.sig'], ['index.bin', 'manifest.sig']]) {
      const { store } = fsStore(t);
      const put: typeof store.put = (key, body, options) =>
        failing.some((f) => key.endsWith(`/${f}`))
          ? Promise.reject(Object.assign(new Error(`no ${key}`), { code: 'ERR_OBJECTSTORE_UNAVAILABLE' }))
          : store.put(key, body, options);
      const flaky = new Proxy(store, {
        get(target, prop) {
          if (prop === 'put') return put;
          const v = Reflect.get(target, prop, target) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
      const w = await createArchiveWriter(writerOptions(flaky, k, { shardSize: 64 * 1024 }));
      for (const r of records()) await w.addRecord(r);
      const err = await w.finish().then(
        () => null,
        (e: unknown) => e as { code?: string; object?: string },
      );
      t.equal(err?.code, 'ERR_ARCHIVE_DESTINATION', `${failing.join(' + ')} failing`);
      t.ok(err?.object?.endsWith(`/${failing[0]}`), `names ${failing[0]}`);
      t.equal(await store.head('jobs/job-a/runs/run-0001/manifest.json'), null, 'no manifest stored');
    }
  },
);

t.test(
  'commit fencing: beforeCommit refuses, nothing is committed; a second commit is refused',
  async (t) => {
    const k = keys();
    const { store } = fsStore(t);
    const lost = Object.assign(new Error('lease lost'), { code: 'ERR_STATE_LEASE_LOST' });
    const recs = [0, 1, 2, 3].map((i) => ({ name: `r/${i}`, body: pseudoRandom(100_000, 20 + i) }));
    // The checkpoint of a writer that will lose its lease, taken after its first stored shard.
    let checkpoint: Uint8Array | null = null;
    const stale = await createArchiveWriter(
      writerOptions(store, k, {
        shardSize: 64 * 1024,
        onShard: async () => {
          checkpoint ??= await stale.exportCheckpoint();
        },
      }),
    );
    for (const r of recs) await stale.addRecord(r);
    let checks = 0;
    const fenced = await createArchiveWriter(
      writerOptions(store, k, {
        runId: 'run-0002',
        beforeCommit: () => {
          checks++;
          throw lost;
        },
      }),
    );
    await fenced.addRecord({ name: 'a', body: text(2000) });
    await t.rejects(fenced.finish(), lost, 'the commit fails with the guard’s error');
    t.equal(checks, 1, 'checked before the first write of the commit');
    for (const f of ['manifest.json', 'manifest.sig', 'index.bin'])
      t.equal(await store.head(`jobs/job-a/runs/run-0002/${f}`), null, `no ${f}`);

    // Two writers of one run both reach the manifest (a paused holder and its successor): the
    // manifest is create-only, so the second is refused and the first stays.
    const { writer: resumed, resume } = await resumeArchiveWriter(checkpoint!, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    });
    for (const r of recs.slice(resume.recordsDone)) await resumed.addRecord(r);
    const first = await stale.finish();
    const before = await store.head(first.manifestKey);
    await t.rejects(resumed.finish(), { code: 'ERR_ARCHIVE_DESTINATION' }, 'the second commit is refused');
    t.same(await store.head(first.manifestKey), before, 'the first manifest is untouched');
    // Nor its index and signature (the second writer's puts are create-only as well).
    const v = await verifyRun(store, {
      job: first.job,
      runId: first.runId,
      secretKey: k.operational.secretKey,
    });
    t.equal(v.ok, true, `the committed run still verifies: ${JSON.stringify(v.failure)}`);
  },
);

// Found by the kill soak (bench/soak.mjs): a replica killed after its run's final shard was stored
// and checkpointed, but before the manifest, left a checkpoint from which the next replica sealed a
// second final shard and signed a manifest no reader accepted.
t.test('a run resumed after its final shard was stored signs a manifest that verifies', async (t) => {
  for (const [what, bodies] of [
    ['a short final shard', [pseudoRandom(100_000, 1), pseudoRandom(50_000, 2)]],
    // 128 KiB exactly: the last full shard is flushed as it fills, the final shard is empty.
    ['an empty final shard', [pseudoRandom(65_536, 3), pseudoRandom(65_536, 4)]],
  ] as const) {
    const k = keys();
    const { store } = fsStore(t);
    // The kill: the manifest never reaches the store.
    let dead = true;
    const dying = new Proxy(store, {
      get(target, p) {
        const v = Reflect.get(target, p);
        if (p === 'put')
          return async (key: string, ...rest: unknown[]) => {
            if (dead && key.endsWith('manifest.json'))
              throw Object.assign(new Error('killed'), { code: 'EIO' });
            return (v as (...a: unknown[]) => unknown).call(target, key, ...rest);
          };
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    let checkpoint: Uint8Array | null = null;
    const w = await createArchiveWriter(
      writerOptions(dying, k, {
        shardSize: 64 * 1024,
        compress: false,
        // As the engine's checkpoint saver: a checkpoint after every stored shard.
        onShard: async () => {
          checkpoint = await w.exportCheckpoint();
        },
      }),
    );
    for (const [i, body] of bodies.entries()) await w.addRecord({ name: `r${i}`, body });
    await t.rejects(
      w.finish(),
      { code: 'ERR_ARCHIVE_DESTINATION', object: 'jobs/job-a/runs/run-0001/manifest.json' },
      `${what}: the first attempt dies before its manifest`,
    );
    await w.abort();
    dead = false;
    const { writer, resume } = await resumeArchiveWriter(checkpoint!, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    });
    t.equal(resume.recordsDone, bodies.length, `${what}: every record is in the checkpoint`);
    const summary = await writer.finish();
    t.equal(summary.records, bodies.length);
    const v = await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    t.ok(v.ok, `${what}: the resumed run verifies (${v.failure?.code ?? 'ok'})`);
    const run = await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    const got = await readAll(run);
    t.same(
      got.map((r) => Buffer.compare(Buffer.from(r.body), Buffer.from(bodies[r.entry.seq]!))),
      bodies.map(() => 0),
      `${what}: every record reads back`,
    );

    // Nothing can follow the final shard: a resumed writer given another record refuses it.
    const again = await resumeArchiveWriter(checkpoint!, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    }).catch((e: unknown) => e);
    if (again instanceof Error) {
      t.match(again, { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' }, 'the run is sealed now');
    }
  }
});

t.test('a resumed writer whose checkpoint holds the final shard refuses more records', async (t) => {
  const k = keys();
  const { store } = fsStore(t);
  let checkpoint: Uint8Array | null = null;
  const w = await createArchiveWriter(
    writerOptions(store, k, {
      shardSize: 64 * 1024,
      onShard: async () => {
        checkpoint = await w.exportCheckpoint();
      },
      // Stops right before the commit, as a kill would.
      beforeCommit: () => {
        throw new Error('killed');
      },
    }),
  );
  await w.addRecord({ name: 'a', body: pseudoRandom(90_000, 5) });
  await t.rejects(w.finish());
  await w.abort();
  const { writer } = await resumeArchiveWriter(checkpoint!, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  await t.rejects(writer.addRecord({ name: 'b', body: new Uint8Array(10) }), {
    code: 'ERR_ARCHIVE_RESUME_DIVERGENT',
  });
});

t.test(
  "a holder that stood still past its lease while its successor committed replaces none of the committed run's objects",
  async (t) => {
    const k = keys();
    const { store } = fsStore(t);
    const recs = [0, 1, 2, 3].map((i) => ({ name: `r/${i}`, body: pseudoRandom(100_000, 40 + i) }));
    let checkpoint: Uint8Array | null = null;
    // The paused holder: its records are in, its last shard and its commit are still to come.
    const paused = await createArchiveWriter(
      writerOptions(store, k, {
        shardSize: 64 * 1024,
        onShard: async () => {
          checkpoint ??= await paused.exportCheckpoint();
        },
      }),
    );
    for (const r of recs) await paused.addRecord(r);
    // (Shards are stored behind addRecord: the first one's checkpoint comes when it is stored.)
    for (let i = 0; i < 200 && checkpoint === null; i++) await new Promise((r) => setTimeout(r, 10));
    // Its successor resumes from the checkpoint and commits the run.
    const { writer, resume } = await resumeArchiveWriter(checkpoint!, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    });
    for (const r of recs.slice(resume.recordsDone)) await writer.addRecord(r);
    const committed = await writer.finish();
    const listed = async () =>
      (await store.list('jobs/job-a/runs/run-0001/')).objects.map(
        (o) => `${o.key} ${o.size} ${o.etag ?? ''}`,
      );
    const before = await listed();
    // The paused holder wakes: its final shard is in the way of the successor's, and it stops.
    await t.rejects(paused.finish(), { code: 'ERR_ARCHIVE_DESTINATION' }, 'the paused holder stops');
    const v = await verifyRun(store, {
      job: committed.job,
      runId: committed.runId,
      secretKey: k.operational.secretKey,
    });
    t.equal(v.ok, true, `the committed run verifies: ${JSON.stringify(v.failure)}`);
    t.same(await listed(), before, 'no object of the run was replaced');
  },
);
