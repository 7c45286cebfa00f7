/**
 * The canary flight below the HTTP layer: a flight into a real S3 bucket (radosgw on loopback)
 * through the `_canary/` namespace, read back and verified; a canary object corrupted in the
 * bucket between write and read, a manifest re-signed by another key, a destination that refuses,
 * throttles or hangs; the verdict rules; the namespace that cannot be left; the sweep that
 * deletes only earlier flights inside it; the in-memory self-check; and no credential, endpoint
 * or key in any outcome.
 */
import { listRuns } from '@coffer/archive';
import { generateRecipient, generateSigner } from '@coffer/crypto';
import { createS3Store, type ObjectStore, ObjectStoreError } from '@coffer/objectstore';
import { createTestBucket } from '@coffer/testkit';
import t from 'tap';
import {
  CANARY_PREFIX,
  CANARY_RUNS_PREFIX,
  canaryStore,
  flightTime,
  flyOnce,
  memoryStore,
  outcomeOf,
  overallVerdict,
  sweep,
} from '../../src/canary/index.ts';
import { newRunId } from '../../src/runs/instance-id.ts';

const signer = generateSigner();
const operational = generateRecipient();
const breakGlass = generateRecipient();
const keys = {
  signer,
  operational,
  breakGlass: { publicKey: breakGlass.publicKey },
};

async function bucketStore(prefix = 'dest') {
  const b = await createTestBucket('coffer-canary');
  const raw = (p = prefix) =>
    createS3Store({
      bucket: b.bucket,
      prefix: p,
      endpoint: b.endpoint,
      region: b.region,
      forcePathStyle: true,
      credentials: b.credentials,
    });
  return { b, store: raw(), root: raw('') };
}

async function keysIn(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.listAll(prefix)) out.push(o.key);
  return out.sort();
}

/** `store` with some operations replaced (works for class-based drivers too). */
function over(store: ObjectStore, replaced: Partial<ObjectStore>): ObjectStore {
  return {
    description: store.description,
    put: (k, b, o) => store.put(k, b, o),
    get: (k, r, o) => store.get(k, r, o),
    getStream: (k, r) => store.getStream(k, r),
    head: (k) => store.head(k),
    list: (p, o) => store.list(p, o),
    listAll: (p) => store.listAll(p),
    delete: (k) => store.delete(k),
    ...replaced,
  };
}

const flight = (store: ObjectStore, over: Partial<Parameters<typeof flyOnce>[1]> = {}) =>
  flyOnce(store, { id: newRunId(new Date()), keys, engineVersion: '9.9.9', timeoutMs: 60_000, ...over });

t.test('an alive flight: sealed, signed, read back, under _canary/ only', async (t) => {
  const { store, root } = await bucketStore();
  const id = newRunId(new Date());
  const out = await flight(canaryStore(store), { id });
  t.same(out, { verdict: 'alive', code: null, message: null, bytes: out.bytes });
  t.ok(out.bytes > 1024, `a sealed archive of ${out.bytes} bytes`);
  const all = await keysIn(root);
  t.ok(all.length >= 4, 'manifest, signature, index and a shard');
  for (const k of all)
    t.ok(k.startsWith(`dest/${CANARY_PREFIX}jobs/canary/runs/${id}/`), `${k} in the namespace`);
  t.ok(all.includes(`dest/_canary/jobs/canary/runs/${id}/manifest.json`));
  t.same(await listRuns(store), [], 'a run listing of the destination sees no canary run');
  t.equal((await keysIn(store, 'jobs/')).length, 0, 'nothing under jobs/');
  t.equal((await keysIn(store, '_RECOVERY/')).length, 0, 'no _RECOVERY/ written by the canary');
});

t.test('without a break-glass key the flight seals to a one-off stand-in', async (t) => {
  const out = await flight(canaryStore(memoryStore()), { keys: { ...keys, breakGlass: null } });
  t.equal(out.verdict, 'alive');
});

t.test('a canary shard corrupted in the bucket between write and read: dead, not a crash', async (t) => {
  const { store } = await bucketStore();
  const id = newRunId(new Date());
  let corrupted = '';
  // The manifest is the commit point: right after it lands, flip one byte of the first shard in
  // the real bucket (as a bucket writer would), before the flight reads anything back.
  const tampering = over(store, {
    async put(key, body, options) {
      const r = await store.put(key, body, options);
      if (key.endsWith('/manifest.json')) {
        const shard = key.replace('manifest.json', 'shards/000000.bin');
        const bytes = await store.get(shard);
        bytes[bytes.length - 20] = bytes[bytes.length - 20]! ^ 0xff;
        await store.put(shard, bytes);
        corrupted = shard;
      }
      return r;
    },
  });
  const out = await flight(canaryStore(tampering), { id });
  t.equal(
    corrupted,
    `_canary/jobs/canary/runs/${id}/shards/000000.bin`,
    'the shard in the namespace was hit',
  );
  t.equal(out.verdict, 'dead');
  t.match(out.code, /^ERR_ARCHIVE_SHARD_TAMPERED$/);
  t.match(out.message, /^read-back verification failed \(ERR_ARCHIVE_SHARD_TAMPERED\)$/);
});

t.test('a manifest signed by another key, or a flipped index byte: dead', async (t) => {
  const other = generateSigner();
  // Written with one signer, read back pinned to another: the signature check refuses it.
  const mem = memoryStore();
  const id = newRunId(new Date());
  const forged = await flyOnce(canaryStore(mem), {
    id,
    keys: { ...keys, signer: { secretKey: other.secretKey, publicKey: signer.publicKey } },
    engineVersion: '9.9.9',
    timeoutMs: 60_000,
  });
  t.equal(forged.verdict, 'dead');
  t.match(forged.code, /^ERR_ARCHIVE_(BAD_SIGNATURE|SIGNER_NOT_PINNED|MANIFEST_TAMPERED)$/);

  const tampering = memoryStore();
  const wrapped = over(tampering, {
    async put(key, body, options) {
      if (!key.endsWith('/index.bin') || !(body instanceof Uint8Array))
        return tampering.put(key, body, options);
      const copy = body.slice();
      copy[copy.length - 1] = copy[copy.length - 1]! ^ 1;
      return tampering.put(key, copy, options);
    },
  });
  const out = await flight(canaryStore(wrapped));
  t.equal(out.verdict, 'dead');
  t.match(out.code, /^ERR_ARCHIVE_INDEX_TAMPERED$/);
});

/** A store whose every operation of kind `op` fails with `code`. */
function refusing(store: ObjectStore, op: 'put' | 'get', code: ObjectStoreError['code'], storeCode?: string) {
  const fail = () => {
    throw new ObjectStoreError(code, 'put "k" on s3://bucket-name/pre at http://127.0.0.1:9/ SECRET-MARKER', {
      ...(storeCode ? { storeCode } : {}),
    });
  };
  return over(store, op === 'put' ? { put: async () => fail() } : { get: async () => fail() });
}

t.test('verdicts from the destination: refused is dead, throttled or unreachable is undecided', async (t) => {
  const cases: [string, 'put' | 'get', ObjectStoreError['code'], string | undefined, string][] = [
    ['access denied on write', 'put', 'ERR_OBJECTSTORE_ACCESS_DENIED', 'AccessDenied', 'dead'],
    ['rejected write', 'put', 'ERR_OBJECTSTORE_REJECTED', 'NoSuchBucket', 'dead'],
    ['throttled write', 'put', 'ERR_OBJECTSTORE_THROTTLED', 'SlowDown', 'undecided'],
    ['network fault on write', 'put', 'ERR_OBJECTSTORE_FAULT', 'ECONNRESET', 'undecided'],
    ['access denied on read', 'get', 'ERR_OBJECTSTORE_ACCESS_DENIED', 'AccessDenied', 'dead'],
    ['throttled read', 'get', 'ERR_OBJECTSTORE_THROTTLED', 'SlowDown', 'undecided'],
    ['network fault on read', 'get', 'ERR_OBJECTSTORE_FAULT', undefined, 'undecided'],
    ['object gone on read', 'get', 'ERR_OBJECTSTORE_NOT_FOUND', 'NoSuchKey', 'dead'],
  ];
  for (const [what, op, code, storeCode, verdict] of cases) {
    const out = await flight(canaryStore(refusing(memoryStore(), op, code, storeCode)));
    t.equal(out.verdict, verdict, `${what}: ${verdict}`);
    t.equal(out.code, code, `${what}: the store's code`);
    t.equal(out.bytes, 0);
    t.match(out.message, op === 'put' ? /canary write/ : /canary read-back/, `${what}: names the phase`);
    if (storeCode) t.match(out.message, storeCode, `${what}: the store's own code`);
    const text = JSON.stringify(out);
    t.notMatch(text, /SECRET-MARKER|127\.0\.0\.1|s3:\/\/|bucket-name|"k"/, `${what}: no raw message text`);
  }
});

t.test('a destination that never answers: undecided once the flight runs out of time', async (t) => {
  const hanging = over(memoryStore(), { put: () => new Promise(() => undefined) });
  const started = Date.now();
  const out = await flight(canaryStore(hanging), { timeoutMs: 300 });
  t.ok(Date.now() - started < 10_000, 'gave up on time');
  t.same(out, {
    verdict: 'undecided',
    code: 'ERR_CANARY_TIMEOUT',
    message: 'the flight ran out of time before it was read back',
    bytes: 0,
  });
});

t.test('a wrong S3 secret: dead, and no credential or endpoint in the outcome', async (t) => {
  const { b } = await bucketStore();
  const secret = `wrong-secret-${Math.random().toString(36).slice(2)}`;
  const store = createS3Store({
    bucket: b.bucket,
    prefix: 'dest',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: { accessKeyId: b.credentials.accessKeyId, secretAccessKey: secret },
    maxAttempts: 1,
  });
  const out = await flight(canaryStore(store));
  t.equal(out.verdict, 'dead');
  t.equal(out.code, 'ERR_OBJECTSTORE_ACCESS_DENIED');
  const text = JSON.stringify(out);
  for (const s of [secret, b.endpoint, b.bucket, b.credentials.accessKeyId, 's3://'])
    t.notOk(text.includes(s), 'no credential, endpoint or bucket in the outcome');
});

t.test('outcomeOf and overallVerdict', async (t) => {
  t.equal(outcomeOf(new TypeError('boom'), 'write').verdict, 'dead', 'an internal error is dead');
  t.equal(outcomeOf(new TypeError('boom'), 'write').code, 'ERR_CANARY_INTERNAL');
  t.equal(outcomeOf({ code: 'ERR_ARCHIVE_RECORD_TAMPERED' }, 'read').verdict, 'dead');
  const wrapped = { code: 'ERR_ARCHIVE_DESTINATION', storeErrorCode: 'ERR_OBJECTSTORE_THROTTLED', cause: {} };
  t.equal(outcomeOf(wrapped, 'write').verdict, 'undecided', 'a throttle wrapped by the archive');
  t.equal(overallVerdict([]), 'undecided', 'no destination: undecided');
  t.equal(overallVerdict([{ verdict: 'alive' }, { verdict: 'alive' }]), 'alive');
  t.equal(overallVerdict([{ verdict: 'alive' }, { verdict: 'undecided' }]), 'undecided');
  t.equal(overallVerdict([{ verdict: 'undecided' }, { verdict: 'dead' }]), 'dead');
});

t.test('the namespace cannot be left: escaping keys are refused before the store is touched', async (t) => {
  const touched: string[] = [];
  const spy = over(memoryStore(), {
    put: async (k) => {
      touched.push(k);
      return {};
    },
    delete: async (k) => {
      touched.push(k);
    },
    get: async (k) => {
      touched.push(k);
      return new Uint8Array();
    },
  });
  const scoped = canaryStore(spy);
  for (const key of ['../jobs/x/runs/y/manifest.json', '/jobs/x', 'a/../../jobs/x', './x', 'a//b', '']) {
    await t.rejects(
      scoped.put(key, new Uint8Array(1)),
      { code: 'ERR_OBJECTSTORE_INVALID_KEY' },
      `put ${key}`,
    );
    await t.rejects(scoped.delete(key), { code: 'ERR_OBJECTSTORE_INVALID_KEY' }, `delete ${key}`);
  }
  t.same(touched, [], 'the destination saw none of them');
  await scoped.delete('jobs/canary/runs/x/manifest.json');
  t.same(touched, ['_canary/jobs/canary/runs/x/manifest.json'], 'a plain key lands under _canary/');
});

t.test('sweep: earlier flights go, the kept one, young ones and everything outside stay', async (t) => {
  const { store } = await bucketStore();
  const run = 'jobs/docs/runs/20200101T000000000Z-aaaaaaaa/manifest.json';
  await store.put(run, new Uint8Array([1]));
  await store.put('_RECOVERY/FORMAT', new Uint8Array([1]));
  const scoped = canaryStore(store);
  const old = '20200101T000000000Z-00000001';
  const keep = '20200101T010000000Z-00000002';
  const young = '20200101T010500000Z-00000003';
  for (const id of [old, keep, young]) {
    await scoped.put(`${CANARY_RUNS_PREFIX}${id}/manifest.json`, new Uint8Array([1]));
    await scoped.put(`${CANARY_RUNS_PREFIX}${id}/shards/000000.bin`, new Uint8Array([1]));
  }
  await scoped.put('stray.txt', new Uint8Array([1]));
  const removed = await sweep(scoped, keep, flightTime(keep)!);
  t.equal(removed, 2, 'the old flight had two objects');
  t.same(await keysIn(store), [
    '_RECOVERY/FORMAT',
    `_canary/${CANARY_RUNS_PREFIX}${keep}/manifest.json`,
    `_canary/${CANARY_RUNS_PREFIX}${keep}/shards/000000.bin`,
    `_canary/${CANARY_RUNS_PREFIX}${young}/manifest.json`,
    `_canary/${CANARY_RUNS_PREFIX}${young}/shards/000000.bin`,
    '_canary/stray.txt',
    run,
  ]);
  t.equal(flightTime('not-a-flight'), null);
  t.equal(flightTime(old), Date.UTC(2020, 0, 1));
});
