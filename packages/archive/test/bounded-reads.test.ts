/**
 * A hostile bucket cannot exhaust the reader (docs/archive-format.md "Read"): the manifest and its
 * signature are read with fixed ceilings, the index and every shard with the size the manifest
 * signs, never whole first. Each case replaces one object of a sealed run by a huge one (an 8 GiB
 * sparse file in an fs store costs no disk; on S3 an object a few hundred MiB past its bound) and
 * reads the run in a child process with a 64 MiB heap and a 7 GiB address space, so a reader that
 * loads an 8 GiB object whole dies instead of passing; on S3 the child's peak resident memory must
 * stay under the hostile object's size (the body is refused on its Content-Length, never downloaded).
 */
import { spawn } from 'node:child_process';
import { truncateSync } from 'node:fs';
import { join } from 'node:path';
import { toBase64Url } from '@coffer/crypto';
import { createS3Store, type ObjectStore } from '@coffer/objectstore';
import { createTestBucket } from '@coffer/testkit';
import t from 'tap';
import { layout } from '../src/index.ts';
import { fsStore, keys, pseudoRandom, sealRun, text } from './helpers.ts';

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;
const CHILD = join(import.meta.dirname, 'bounded-read-child.ts');

function readInChild(
  spec: object,
): Promise<{ code: number | null; signal: string | null; out: string; err: string }> {
  const k = keys();
  // ulimit -v caps the address space below 8 GiB (a reader with its worker threads needs about 6).
  const cmd = `ulimit -v ${7 * 1024 * 1024} && exec "$0" --max-old-space-size=64 "$@"`;
  const child = spawn('sh', ['-c', cmd, process.execPath, CHILD, JSON.stringify(spec), 'job-a', 'run-0001'], {
    env: { ...process.env, BOUNDED_SECRET_KEY: toBase64Url(k.operational.secretKey) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, out, err: err.slice(-2000) })),
  );
}

async function sealed(store: ObjectStore): Promise<void> {
  await sealRun(
    store,
    keys(),
    [
      { name: 'a.txt', body: text(200_000, 1) },
      { name: 'b.bin', body: pseudoRandom(150_000, 2) },
    ],
    { shardSize: 64 * 1024 },
  );
}

const cases: { object: string; want: Record<string, string> }[] = [
  {
    object: layout.index('job-a', 'run-0001'),
    want: { verify: 'ERR_ARCHIVE_INDEX_TAMPERED', index: 'ERR_ARCHIVE_INDEX_TAMPERED' },
  },
  {
    object: layout.shard('job-a', 'run-0001', 0),
    want: {
      verify: 'ERR_ARCHIVE_SHARD_TAMPERED',
      record: 'ERR_ARCHIVE_SHARD_TAMPERED',
      records: 'ERR_ARCHIVE_SHARD_TAMPERED',
    },
  },
  {
    object: layout.manifest('job-a', 'run-0001'),
    want: { verify: 'ERR_ARCHIVE_MANIFEST_MALFORMED', open: 'ERR_ARCHIVE_MANIFEST_MALFORMED' },
  },
  {
    object: layout.signature('job-a', 'run-0001'),
    want: { verify: 'ERR_ARCHIVE_BAD_SIGNATURE', open: 'ERR_ARCHIVE_BAD_SIGNATURE' },
  },
];

for (const c of cases) {
  t.test(`fs: ${c.object} replaced by an 8 GiB object is a verification failure`, async (t) => {
    const { store, root } = fsStore(t);
    await sealed(store);
    truncateSync(join(root, c.object), 8 * GIB);
    const r = await readInChild({ root });
    t.equal(r.code, 0, `the reader exits normally (signal ${r.signal}) ${r.err}`);
    const got = JSON.parse(r.out || '{}') as Record<string, string | null>;
    t.match(got, c.want, JSON.stringify(got));
  });
}

t.test('s3: index.bin 304 MiB past its signed size is refused on its length', async (t) => {
  const bucket = await createTestBucket('h13-bounded');
  const options = { ...bucket, prefix: 'dest' };
  const store = createS3Store(options);
  await sealed(store);
  const object = layout.index('job-a', 'run-0001');
  const zeros = new Uint8Array(8 * MIB);
  const size = 38 * zeros.length;
  await store.put(
    object,
    (async function* () {
      for (let n = 0; n < size; n += zeros.length) yield zeros;
    })(),
    { contentLength: size },
  );
  const r = await readInChild(options);
  t.equal(r.code, 0, `the reader exits normally (signal ${r.signal}) ${r.err}`);
  const got = JSON.parse(r.out || '{}') as Record<string, string | null>;
  t.match(
    got,
    { verify: 'ERR_ARCHIVE_INDEX_TAMPERED', index: 'ERR_ARCHIVE_INDEX_TAMPERED' },
    JSON.stringify(got),
  );
  t.ok(Number(got.maxRssMiB) < 300, `the object was never held whole (peak RSS ${got.maxRssMiB} MiB)`);
});
