/**
 * No (data key, nonce) pair ever seals two plaintexts (docs/archive-format.md "Sealed frame"): a
 * resumed run keeps the checkpoint's data key and seals again the shard numbers a crashed session
 * had stored past its last checkpoint, and, when a session died between storing index.bin and the
 * manifest, the index too. On a versioned bucket every one of those objects stays readable, so the
 * test keeps every byte string ever put and checks their nonces, read from the frame headers as
 * the format defines them.
 */
import type { ObjectStore } from '@coffer/objectstore';
import t from 'tap';
import { createArchiveWriter, type RecordInput, resumeArchiveWriter, verifyRun } from '../src/index.ts';
import { fsStore, keys, pseudoRandom, writerOptions } from './helpers.ts';

interface Put {
  key: string;
  bytes: Uint8Array;
}

/** A store that keeps a copy of every body put into it (a versioned bucket, in effect). */
function keeping(store: ObjectStore, puts: Put[], refuse?: (key: string) => boolean): ObjectStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'put') {
        return async (key: string, body: Uint8Array, options?: object) => {
          if (refuse?.(key)) throw Object.assign(new Error('injected'), { code: 'ERR_OBJECTSTORE_FAULT' });
          // Only what the store took (a create-only put it refused stored nothing).
          const bytes = Uint8Array.from(body);
          const r = await target.put(key, body, options);
          puts.push({ key, bytes });
          return r;
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** The frame nonces of one stored object: one for a shard, one per chunk for index.bin. */
function frameNonces(bytes: Uint8Array): string[] {
  const out: string[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let pos = 0; pos + 48 <= bytes.length; ) {
    const domain = bytes[pos] === 0x43 && bytes[pos + 2] === 0x49 ? 1 : 0; // "CFIX" or "CFSH"
    const flags = bytes[pos + 6]!;
    const salt = (flags & 4) !== 0 ? bytes.subarray(pos + 26, pos + 32) : new Uint8Array(6);
    const seq = view.getUint32(pos + 8);
    out.push(`${domain}:${Buffer.from(salt).toString('hex')}:${seq}:${flags & 1}`);
    pos += 32 + view.getUint32(pos + 16) + 16;
  }
  return out;
}

/** Nonces that sealed two different byte strings, as "nonce (object, object)". */
function reusedNonces(puts: Put[]): string[] {
  const seen = new Map<string, Put>();
  const reused: string[] = [];
  for (const p of puts) {
    if (!p.key.endsWith('.bin')) continue;
    for (const n of frameNonces(p.bytes)) {
      const prev = seen.get(n);
      if (prev === undefined) seen.set(n, p);
      else if (Buffer.compare(prev.bytes, p.bytes) !== 0) reused.push(`${n} (${prev.key}, ${p.key})`);
    }
  }
  return reused;
}

/**
 * The source as session `version` reads it: every record after the one the checkpoint stopped in
 * (`done`, whose sealed prefix must not change) has changed since the first session read it.
 */
function records(version: number, done = 0): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 24; i++)
    out.push({ name: `r/${i}`, body: pseudoRandom(40_000, i * 10 + (i <= done ? 1 : version)) });
  return out;
}

t.test('resuming twice from one checkpoint with a changed source reuses no nonce', async (t) => {
  const k = keys();
  const { store: base } = fsStore(t);
  const puts: Put[] = [];
  const store = keeping(base, puts);
  let checkpoint: Uint8Array | null = null;
  let shards = 0;
  const w = await createArchiveWriter(
    writerOptions(store, k, {
      shardSize: 64 * 1024,
      onShard: async () => {
        if (++shards === 3) checkpoint = await w.exportCheckpoint();
      },
    }),
  );
  // Session 1 stores shards past its checkpoint, then dies.
  for (const r of records(1)) await w.addRecord(r);
  await w.abort();
  t.ok(checkpoint, 'checkpoint taken');
  const stored1 = puts.filter((p) => p.key.includes('/shards/')).length;
  t.ok(stored1 > 6, `session 1 stored ${stored1} shards, several past the checkpoint`);

  // Session 2 resumes with changed source bytes and dies after storing index.bin, before the commit.
  const failing = keeping(base, puts, (key) => key.endsWith('manifest.json'));
  const r2 = await resumeArchiveWriter(checkpoint!, {
    store: failing,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  for (const r of records(2, r2.resume.recordsDone).slice(r2.resume.recordsDone))
    await r2.writer.addRecord(r);
  await t.rejects(r2.writer.finish(), 'the commit fails');
  t.ok(
    puts.some((p) => p.key.endsWith('index.bin')),
    'session 2 stored its index',
  );

  // Session 3 resumes from the same checkpoint with other bytes again and commits.
  const r3 = await resumeArchiveWriter(checkpoint!, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  for (const r of records(3, r3.resume.recordsDone).slice(r3.resume.recordsDone))
    await r3.writer.addRecord(r);
  await r3.writer.finish();

  const shardPuts = puts.filter((p) => p.key.includes('/shards/'));
  const keysPut = shardPuts.map((p) => p.key);
  t.ok(keysPut.length > new Set(keysPut).size, 'shard objects were stored more than once');
  t.equal(puts.filter((p) => p.key.endsWith('index.bin')).length, 2, 'index.bin was stored twice');
  t.same(reusedNonces(puts), [], 'no nonce sealed two different frames');
  const verdict = await verifyRun(base, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  t.equal(verdict.ok, true, 'the committed run verifies');
});
