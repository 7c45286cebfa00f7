// coffer-recover on format 0.2 runs (docs/archive-format.md §12), as a real process: a three-run
// chain of one job written by @coffer/archive's chunked writer, where run 2 changes one record and
// run 3 another, so the newest run's records come from packs stored by all three runs.
import {
  copyFileSync,
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  type ChunkedRunSummary,
  createChunkedWriter,
  layout,
  loadChunkedBase,
  type RecordInput,
} from '@coffer/archive';
import {
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  generateSigner,
  type RecipientKeyPair,
  type SignerKeyPair,
} from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { pseudoRandom, writeRun as writeShardedRun } from './fixture.ts';
import { APP_ROOT, cliArgs, runCli } from './helpers.ts';

const JOB = 'files';
// Small chunks and packs so a few MiB make many of both. A pack holds at most PACK_SIZE +
// maxSize bytes, so a record over twice that fills at least one pack with its chunks alone.
const CHUNKING = { minSize: 2048, avgSize: 8192, maxSize: 65536 };
const PACK_SIZE = 256 * 1024;
/** Over 32 MiB: a 0.1 run's would stream through readRecord; a 0.2 run's comes in parts. */
const BIG = 33 * 1024 * 1024;

interface Rec {
  name: string;
  data: Buffer;
  /** The source's change token: equal to the previous run's means "not read, referenced". */
  change: string;
  metadata?: RecordInput['metadata'];
}

/** Record order matters: the broken-chain checks rely on which records precede which. */
function version(run: 1 | 2 | 3): Rec[] {
  const c = pseudoRandom(100 * 1024, 3);
  if (run === 3) c.set(pseudoRandom(1000, 33), 50 * 1024); // same size, a middle edit
  return [
    {
      name: 'docs/readme.txt',
      data: Buffer.from('hello from a chunked run\n'),
      change: 'readme-1',
      metadata: { mode: 0o640, mtime: '2024-01-02T03:04:05.000Z' },
    },
    { name: 'empty', data: Buffer.alloc(0), change: 'empty-1' },
    { name: 'a/stable.bin', data: pseudoRandom(768 * 1024, 1), change: 'a-1' },
    {
      name: 'b/changes-in-run-2.txt',
      data: Buffer.from(`${run >= 2 ? 'second' : 'first'} version of b\n`.repeat(2000)),
      change: run >= 2 ? 'b-2' : 'b-1',
    },
    { name: 'c/changes-in-run-3.bin', data: c, change: run === 3 ? 'c-3' : 'c-1' },
    { name: 'big/video.bin', data: pseudoRandom(BIG, 5), change: 'big-1' },
  ];
}

/** A body that fails the run if read: an unchanged record must be referenced, not read. */
function untouchable(): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      throw new Error('an unchanged record was read');
    },
  };
}

interface PackSeal {
  pack: string;
  /** Records completed before this pack was sealed, and when the previous pack was. */
  recordsDone: number;
  previousRecordsDone: number;
}

interface Chain {
  dir: string;
  bucket: string;
  breakGlassKey: string;
  operationalKey: string;
  signerFingerprint: string;
  keyId: string;
  summaries: Record<string, ChunkedRunSummary>;
  /** Packs of each run, in the order they were sealed. */
  packs: Record<string, PackSeal[]>;
  expected: Record<string, Rec[]>;
}

async function writeChunkedRun(
  store: ObjectStore,
  signer: SignerKeyPair,
  op: RecipientKeyPair,
  recipients: { operational: Uint8Array; breakGlass: Uint8Array },
  runId: string,
  prevRunId: string | null,
  records: Rec[],
  previous: Rec[] | null,
  seals: PackSeal[],
): Promise<ChunkedRunSummary> {
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: prevRunId,
    secretKey: op.secretKey,
    signerPublicKey: signer.publicKey,
  });
  let previousRecordsDone = 0;
  const w = await createChunkedWriter({
    store,
    job: JOB,
    runId,
    prevRunId,
    signerSecretKey: signer.secretKey,
    recipients,
    source: { type: 'files', binding: 'main', origin: '/srv/data' },
    base,
    chunking: CHUNKING,
    packSize: PACK_SIZE,
    onPack: (e) => {
      seals.push({ pack: e.pack, recordsDone: e.recordsDone, previousRecordsDone });
      previousRecordsDone = e.recordsDone;
    },
  });
  for (const r of records) {
    const unchanged = previous?.some((p) => p.name === r.name && p.change === r.change) ?? false;
    await w.addRecord({
      name: r.name,
      body: unchanged ? untouchable() : r.data,
      size: r.data.byteLength,
      change: r.change,
      ...(r.metadata ? { metadata: r.metadata } : {}),
    });
  }
  return w.finish();
}

async function buildChain(dir: string): Promise<Chain> {
  const bucket = join(dir, 'bucket');
  const breakGlassKey = join(dir, 'break-glass.key');
  const kg = await runCli(['keygen', '--out', breakGlassKey]);
  if (kg.code !== 0) throw new Error(`keygen failed: ${kg.stderr}`);
  const breakGlass = decodeKeyFile(readFileSync(`${breakGlassKey}.pub`, 'utf8'), 'recipient-public').key;
  const op = generateRecipient();
  const operationalKey = join(dir, 'operational.key');
  writeFileSync(operationalKey, encodeKeyFile('recipient-secret', op.secretKey), { mode: 0o600 });
  const signer = generateSigner();
  const recipients = { operational: op.publicKey, breakGlass };
  const store = createFsStore({ root: bucket });
  const expected = { c1: version(1), c2: version(2), c3: version(3) };
  const packs: Record<string, PackSeal[]> = { c1: [], c2: [], c3: [] };
  const summaries: Record<string, ChunkedRunSummary> = {};
  summaries.c1 = await writeChunkedRun(
    store,
    signer,
    op,
    recipients,
    'c1',
    null,
    expected.c1,
    null,
    packs.c1!,
  );
  summaries.c2 = await writeChunkedRun(
    store,
    signer,
    op,
    recipients,
    'c2',
    'c1',
    expected.c2,
    expected.c1,
    packs.c2!,
  );
  summaries.c3 = await writeChunkedRun(
    store,
    signer,
    op,
    recipients,
    'c3',
    'c2',
    expected.c3,
    expected.c2,
    packs.c3!,
  );
  // A 0.1 run of another job in the same bucket: the listing shows both lines side by side.
  await writeShardedRun(bucket, 'legacy', 'l1', null, signer, recipients, [
    { name: 'old.txt', data: Buffer.from('written in format 0.1\n') },
  ]);
  const keyId = readdirSync(join(bucket, 'jobs', JOB, 'packs'))[0]!;
  return {
    dir,
    bucket,
    breakGlassKey,
    operationalKey,
    signerFingerprint: fingerprint(signer.publicKey),
    keyId,
    summaries,
    packs,
    expected,
  };
}

let c: Chain;

t.before(async () => {
  c = await buildChain(tempDir(t, 'coffer-recover-chunked-'));
});

const pin = () => ['--pin-signer', c.signerFingerprint];
const packObject = (pack: string) => layout.pack(JOB, c.keyId, pack);

/** A copy of the chain's bucket to damage without disturbing the other tests. */
function copyBucket(name: string): string {
  const copy = join(c.dir, name);
  cpSync(c.bucket, copy, { recursive: true });
  return copy;
}

/** Every file under `dir`, relative, with `/` separators. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) =>
      join(e.parentPath, e.name)
        .slice(dir.length + 1)
        .split('\\')
        .join('/'),
    )
    .sort();
}

/**
 * A pack of `run` holding chunks of record `index` only: sealed while that record was being added
 * (records done before and after its sealing both equal `index`), so deleting it breaks exactly the
 * records that reference those chunks.
 */
function packOnlyOf(run: string, index: number): string {
  const seal = c.packs[run]!.find((s) => s.previousRecordsDone === index && s.recordsDone === index);
  if (seal === undefined) throw new Error(`no pack of ${run} holds record ${index} alone`);
  return seal.pack;
}

t.test('the chain is what the other tests assume', async (t) => {
  const s = c.summaries;
  t.equal(s.c1!.newChunks, s.c1!.chunks, 'run 1 stores every chunk it references');
  t.equal(s.c2!.unchangedRecords, 5, 'run 2 read only the record it changed');
  t.equal(s.c3!.unchangedRecords, 5, 'run 3 read only the record it changed');
  t.ok(s.c3!.newChunks < 10, `run 3 stored ${s.c3!.newChunks} new chunks (about its middle edit)`);
  t.ok(c.packs.c2!.length >= 1 && c.packs.c3!.length >= 1, 'runs 2 and 3 each stored packs');
  t.ok(packOnlyOf('c1', 2), "a pack of run 1 holds only a/stable.bin's chunks");
  t.ok(packOnlyOf('c1', 5), "a pack of run 1 holds only big/video.bin's chunks");
});

t.test('inspect: a 0.2 run shows packs referenced and new chunks; a 0.1 run its shards', async (t) => {
  const r = await runCli(cliArgs('inspect', { from: c.bucket }));
  t.equal(r.code, 0, r.stderr);
  for (const run of ['c1', 'c2', 'c3']) {
    const s = c.summaries[run]!;
    const line = r.stdout.split('\n').find((l) => l.startsWith(`  ${run} `)) ?? '';
    t.match(
      line,
      new RegExp(
        `format 0\\.2\\.0 +6 records .*\\(\\d+ packs? referenced, ${s.newChunks} new chunks? \\(.* stored by this run\\)\\) .* ok$`,
      ),
      `${run}: ${line}`,
    );
    t.notMatch(line, /shard/);
  }
  t.match(
    r.stdout,
    /\n {2}l1 .*format 0\.1\.\d+ +1 records .*stored, 1 shard\)/,
    'the 0.1 run keeps its shards',
  );

  const j = await runCli(cliArgs('inspect', { from: c.bucket }, '--json'));
  t.equal(j.code, 0, j.stderr);
  const doc = JSON.parse(j.stdout);
  t.same(doc.jobs.sort(), ['files', 'legacy']);
  const packsOf: Record<string, number> = {};
  for (const run of ['c1', 'c2', 'c3']) {
    const v = doc.runs.find((x: { runId: string }) => x.runId === run);
    const s = c.summaries[run]!;
    t.equal(v.formatVersion, '0.2.0');
    t.equal(v.check.status, 'ok');
    t.equal(v.records, 6);
    t.equal(v.bytes, s.bytes);
    t.equal(v.chunks, s.chunks);
    t.equal(v.newChunks, s.newChunks);
    t.equal(v.newBytes, s.newBytes);
    t.equal(v.chunkKey, c.keyId);
    t.equal(v.shards, null, '0.2: no shards');
    t.equal(v.storedBytes, null, "0.2: the job's packs are shared, no per-run stored bytes");
    packsOf[run] = v.packs;
  }
  t.equal(packsOf.c1, c.packs.c1!.length, 'run 1 references exactly the packs it stored');
  t.ok(
    packsOf.c3! > c.packs.c3!.length,
    `run 3 references ${packsOf.c3} packs, more than the ${c.packs.c3!.length} it stored`,
  );
  const l1 = doc.runs.find((x: { runId: string }) => x.runId === 'l1');
  t.equal(l1.shards, 1);
  t.ok(l1.storedBytes > 0);
  for (const f of ['packs', 'chunks', 'newChunks', 'newBytes', 'chunkKey'])
    t.equal(l1[f], null, `0.1: ${f} null`);

  const one = await runCli(cliArgs('inspect', { from: c.bucket, run: 'c3' }));
  t.equal(one.code, 0, one.stderr);
  t.match(one.stdout, /format 0\.2\.0; signature ok/);
  t.match(
    one.stdout,
    /6 records, 33\.\d MiB; \d+ packs referenced, \d+ new chunks? \(.* stored by this run\)/,
  );
  t.match(one.stdout, `packs under jobs/files/packs/${c.keyId}/`);
  t.match(one.stdout, /copy the whole jobs\/files\/ prefix/);
  const keyed = await runCli(
    cliArgs('inspect', { from: c.bucket, run: 'c3', key: c.breakGlassKey }, '--json'),
  );
  t.equal(keyed.code, 0, keyed.stderr);
  const d = JSON.parse(keyed.stdout);
  t.equal(d.run.newChunks, c.summaries.c3!.newChunks);
  t.same(
    d.records.map((x: { name: string; size: number }) => [x.name, x.size]),
    c.expected.c3!.map((x) => [x.name, x.data.byteLength]),
    'records listed with the key',
  );
});

t.test('verify --key reads every run of the chain back, packs of earlier runs included', async (t) => {
  for (const run of ['c1', 'c2', 'c3']) {
    const r = await runCli(cliArgs('verify', { from: c.bucket, run, key: c.breakGlassKey }, ...pin()));
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, new RegExp(`run ${run} \\(job files\\): ok`));
    t.match(r.stdout, /format 0\.2\.0, signature \(pinned signer\), key unwrap and index verified/);
    t.match(
      r.stdout,
      /6 records, 33\.\d MiB read back from \d+ packs of the job \(whichever run stored them\); every chunk matched its id/,
    );
  }
  const j = await runCli(
    cliArgs('verify', { from: c.bucket, run: 'c3', key: c.operationalKey }, ...pin(), '--json'),
  );
  t.equal(j.code, 0, j.stderr);
  const doc = JSON.parse(j.stdout);
  t.equal(doc.mode, 'full');
  t.equal(doc.verdict.ok, true);
  t.equal(doc.verdict.checks.records, 6);
  t.equal(doc.verdict.checks.bytes, c.summaries.c3!.bytes);
  t.equal(doc.run.formatVersion, '0.2.0');
  t.equal(doc.run.newChunks, c.summaries.c3!.newChunks);
});

t.test('verify without a key checks the signed index only and says so', async (t) => {
  const r = await runCli(cliArgs('verify', { from: c.bucket, run: 'c3' }, ...pin()));
  t.equal(r.code, 0, r.stderr);
  t.match(
    r.stdout,
    /run c3 \(job files\): ok \(signed index only; records not decrypted and packs not checked without --key\)/,
  );
  t.match(r.stdout, /the index, .* matched the signed SHA-384; the \d+ packs it references were not checked/);
  t.match(r.stderr, /format 0\.2 run: only its signed index was checked/);
  t.notMatch(r.stdout, /shard/);
  const j = await runCli(cliArgs('verify', { from: c.bucket, run: 'c3' }, ...pin(), '--json'));
  t.equal(j.code, 0, j.stderr);
  const doc = JSON.parse(j.stdout);
  t.equal(doc.mode, 'signed-index');
  t.equal(doc.verdict.checks.objects, 1, 'one object: index.bin');
  t.equal(doc.verdict.checks.bytes, statSync(join(c.bucket, layout.index(JOB, 'c3'))).size);
  t.equal(doc.run.shards, null);
});

function expectExtracted(t: Test, out: string, records: Rec[]): void {
  for (const rec of records) {
    const got = readFileSync(join(out, ...rec.name.split('/')));
    t.ok(got.equals(rec.data), `${rec.name}: ${rec.data.byteLength} bytes, byte-exact`);
  }
  t.same(filesUnder(out), records.map((r) => r.name).sort(), 'nothing else written');
}

t.test(
  'extract with the break-glass key alone: every record byte-exact, whichever run stored it',
  async (t) => {
    for (const run of ['c3', 'c2']) {
      const out = join(c.dir, `out-${run}`);
      const r = await runCli(
        cliArgs('extract', { from: c.bucket, run, key: c.breakGlassKey, to: out }, ...pin()),
      );
      t.equal(r.code, 0, r.stderr);
      t.match(r.stdout, new RegExp(`run ${run} \\(job files\\): extracted 6 of 6 records, 33\\.\\d MiB`));
      expectExtracted(t, out, c.expected[run]!);
      t.equal(statSync(join(out, 'docs', 'readme.txt')).mode & 0o777, 0o640, 'mode from metadata');
      t.equal(
        statSync(join(out, 'docs', 'readme.txt')).mtime.toISOString(),
        '2024-01-02T03:04:05.000Z',
        'mtime from metadata',
      );
    }
    // Run 1, without the streamed record, through the JSON interface.
    const out = join(c.dir, 'out-c1');
    const j = await runCli(
      cliArgs(
        'extract',
        { from: c.bucket, run: 'c1', key: c.breakGlassKey, to: out },
        '--exclude',
        'big/',
        ...pin(),
        '--json',
      ),
    );
    t.equal(j.code, 0, j.stderr);
    const doc = JSON.parse(j.stdout);
    t.equal(doc.records, 5);
    expectExtracted(
      t,
      out,
      c.expected.c1!.filter((r) => !r.name.startsWith('big/')),
    );
  },
);

/** What a failed extract must leave: exactly `present` (each byte-exact), no temporary file. */
function expectPartial(t: Test, out: string, records: Rec[], present: string[]): void {
  const files = filesUnder(out);
  t.same(files, [...present].sort(), `only ${present.join(', ')} written`);
  t.notOk(
    files.some((f) => f.endsWith('.tmp')),
    'no temporary file left',
  );
  for (const name of present) {
    const rec = records.find((r) => r.name === name)!;
    t.ok(
      readFileSync(join(out, ...name.split('/'))).equals(rec.data),
      `${name} written before the failure is complete`,
    );
  }
}

t.test('a deleted pack of run 1 that run 3 references: verify and extract exit 3 naming it', async (t) => {
  const bucket = copyBucket('bucket-no-stable-pack');
  const pack = packObject(packOnlyOf('c1', 2));
  rmSync(join(bucket, ...pack.split('/')));

  const v = await runCli(cliArgs('verify', { from: bucket, run: 'c3', key: c.breakGlassKey }, ...pin()));
  t.equal(v.code, 3, v.stderr);
  const lines = v.stderr.split('\n').filter((l) => l.includes('ERR_RECOVER_VERIFY_FAILED'));
  t.equal(lines.length, 1, 'one error line');
  t.match(lines[0], pack, 'the line names the missing pack');
  t.match(lines[0], /packs stored by earlier runs of its job: the whole jobs\/files\/ prefix/);
  const vj = await runCli(
    cliArgs('verify', { from: bucket, run: 'c3', key: c.breakGlassKey }, ...pin(), '--json'),
  );
  t.equal(vj.code, 3);
  const doc = JSON.parse(vj.stdout);
  t.equal(doc.ok, false);
  t.equal(doc.error.code, 'ERR_RECOVER_VERIFY_FAILED');
  t.equal(doc.error.object, pack);
  t.equal(doc.verdict.failure.code, 'ERR_ARCHIVE_PACK_MISSING');

  // Run 2 references the same pack; run 1 stored it.
  for (const run of ['c1', 'c2']) {
    const older = await runCli(cliArgs('verify', { from: bucket, run, key: c.breakGlassKey }, ...pin()));
    t.equal(older.code, 3, `${run} fails too`);
    t.match(older.stderr, pack);
  }
  // Without a key the packs cannot be checked: the run's signed index is intact, and the output
  // says the packs were not checked rather than claiming the run is whole.
  const nk = await runCli(cliArgs('verify', { from: bucket, run: 'c3' }, ...pin()));
  t.equal(nk.code, 0, nk.stderr);
  t.match(nk.stdout, /packs not checked without --key/);

  const out = join(c.dir, 'out-no-stable-pack');
  const x = await runCli(
    cliArgs('extract', { from: bucket, run: 'c3', key: c.breakGlassKey, to: out }, ...pin()),
  );
  t.equal(x.code, 3, x.stderr);
  t.match(x.stderr, pack, 'extract names the missing pack');
  t.match(x.stderr, /record "a\/stable\.bin"/, `and the record that needed it: ${x.stderr}`);
  // The records before it were written (each verified); it and the later ones were not.
  expectPartial(t, out, c.expected.c3!, ['docs/readme.txt', 'empty']);
});

t.test('a deleted pack in the middle of a streamed record: the record never appears', async (t) => {
  const bucket = copyBucket('bucket-no-big-pack');
  const pack = packObject(packOnlyOf('c1', 5));
  rmSync(join(bucket, ...pack.split('/')));
  const out = join(c.dir, 'out-no-big-pack');
  const x = await runCli(
    cliArgs('extract', { from: bucket, run: 'c3', key: c.breakGlassKey, to: out }, ...pin()),
  );
  t.equal(x.code, 3, x.stderr);
  t.match(x.stderr, pack);
  t.match(x.stderr, /record "big\/video\.bin"/);
  expectPartial(
    t,
    out,
    c.expected.c3!,
    c.expected.c3!.filter((r) => r.name !== 'big/video.bin').map((r) => r.name),
  );
});

t.test("one run's folder copied without its job's packs fails clearly, with the remedy", async (t) => {
  const alone = join(c.dir, 'bucket-one-run');
  cpSync(join(c.bucket, 'jobs', JOB, 'runs', 'c3'), join(alone, 'jobs', JOB, 'runs', 'c3'), {
    recursive: true,
  });
  const i = await runCli(cliArgs('inspect', { from: alone }));
  t.equal(i.code, 0, i.stderr);
  t.match(i.stdout, /c3 .*format 0\.2\.0 .* ok/, 'the manifest alone still inspects');
  const v = await runCli(cliArgs('verify', { from: alone, run: 'c3', key: c.breakGlassKey }, ...pin()));
  t.equal(v.code, 3, v.stderr);
  t.match(v.stderr, /ERR_RECOVER_VERIFY_FAILED/);
  t.match(v.stderr, `jobs/files/packs/${c.keyId}/`);
  t.match(v.stderr, /the whole jobs\/files\/ prefix, packs included, must be present/);
  const out = join(c.dir, 'out-one-run');
  const x = await runCli(
    cliArgs('extract', { from: alone, run: 'c3', key: c.breakGlassKey, to: out }, ...pin()),
  );
  t.equal(x.code, 3, x.stderr);
  t.match(x.stderr, /the whole jobs\/files\/ prefix, packs included, must be present/);
  t.same(filesUnder(out), [], 'nothing written: the first record already needs a pack');
});

t.test('the air-gapped bundle, copied alone, extracts run 3 of the chain', async (t) => {
  const bundle = join(APP_ROOT, 'dist', 'coffer-recover.mjs');
  t.ok(existsSync(bundle), 'bundle built (pnpm --filter @coffer/recover build)');
  if (!existsSync(bundle)) return;
  const alone = tempDir(t, 'coffer-recover-chunked-bundle-');
  const copy = join(alone, 'coffer-recover.mjs');
  copyFileSync(bundle, copy);
  const out = join(alone, 'out');
  const r = await runCli(
    cliArgs('extract', { from: c.bucket, run: 'c3', key: c.breakGlassKey, to: out }, ...pin()),
    { entry: copy, cwd: alone },
  );
  t.equal(r.code, 0, r.stderr);
  expectExtracted(t, out, c.expected.c3!);
});

t.test(
  'a record over 4 MiB is written in parts as its packs verify: byte-exact, and a pack gone near its end leaves no trace of it',
  async (t) => {
    // Its own run: 6 MiB over ~24 packs of 256 KiB, between two small records. Extract hands a
    // record over 4 MiB (PART_BYTES) to the writer part by part; the file appears only once the
    // record's SHA-384 matched.
    const dir = tempDir(t, 'coffer-recover-parts-');
    const bucket = join(dir, 'bucket');
    const store = createFsStore({ root: bucket });
    const signer = generateSigner();
    const op = generateRecipient();
    const breakGlass = decodeKeyFile(readFileSync(`${c.breakGlassKey}.pub`, 'utf8'), 'recipient-public').key;
    const records: Rec[] = [
      { name: 'before.txt', data: Buffer.from('written first\n'), change: 'x' },
      { name: 'mid/large.bin', data: pseudoRandom(6 * 1024 * 1024, 77), change: 'y' },
      { name: 'after.txt', data: Buffer.from('written last\n'), change: 'z' },
    ];
    const seals: PackSeal[] = [];
    await writeChunkedRun(
      store,
      signer,
      op,
      { operational: op.publicKey, breakGlass },
      'p1',
      null,
      records,
      null,
      seals,
    );
    const pinned = ['--pin-signer', fingerprint(signer.publicKey)];
    const out = join(dir, 'out');
    const r = await runCli(
      cliArgs('extract', { from: bucket, run: 'p1', key: c.breakGlassKey, to: out }, ...pinned),
    );
    t.equal(r.code, 0, r.stderr);
    expectExtracted(t, out, records);

    // The last pack holding only the large record's chunks: its earlier parts were written to the
    // temporary file by the time the reader finds it missing.
    const own = seals.filter((s) => s.previousRecordsDone === 1 && s.recordsDone === 1);
    t.ok(own.length > 16, `${own.length} packs hold only the large record's chunks`);
    const keyId = readdirSync(join(bucket, 'jobs', JOB, 'packs'))[0]!;
    const gone = layout.pack(JOB, keyId, own.at(-1)!.pack);
    rmSync(join(bucket, ...gone.split('/')));
    const broken = join(dir, 'out-broken');
    const x = await runCli(
      cliArgs('extract', { from: bucket, run: 'p1', key: c.breakGlassKey, to: broken }, ...pinned),
    );
    t.equal(x.code, 3, x.stderr);
    t.match(x.stderr, gone, 'names the missing pack');
    t.match(x.stderr, /record "mid\/large\.bin"/, 'and the record that needed it');
    expectPartial(t, broken, records, ['before.txt']);
  },
);
