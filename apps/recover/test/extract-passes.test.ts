// `coffer-recover extract` of a 0.2 run over the hold limit (COFFER_RECOVER_HOLD_RECORDS, here 0
// or a few records): the run is extracted in passes over its index, holding none of it. Every
// scenario runs both ways, as a real process, and must give the same files, the same result
// document and the same refusals (code, exit and message) as the held extract.
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { createChunkedWriter, type RecordInput } from '@coffer/archive';
import { decodeKeyFile, fingerprint, generateRecipient, generateSigner } from '@coffer/crypto';
import { createFsStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { pseudoRandom } from './fixture.ts';
import { type CliResult, cliArgs, runCli } from './helpers.ts';

const JOB = 'files';

/** 40 small records in four directories, an empty one, a 5 MiB one (read in parts) and more small ones. */
function records(): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 40; i++)
    out.push({
      name: `d${i % 4}/f${String(i).padStart(2, '0')}.txt`,
      body: Buffer.from(`record ${i}\n`.repeat(50 + i)),
    });
  out.push({ name: 'empty', body: new Uint8Array(0) });
  out.push({ name: 'big/five.bin', body: pseudoRandom(5 * 1024 * 1024, 9), metadata: { mode: 0o600 } });
  for (let i = 0; i < 10; i++) out.push({ name: `z/tail-${i}`, body: pseudoRandom(3000 + i, i) });
  return out;
}

interface Fixture {
  dir: string;
  bucket: string;
  key: string;
  pin: string;
  /** A pack of run r1 holding chunks of its big record only, near its end. */
  bigPack: string;
}

async function writeRun(
  bucket: string,
  runId: string,
  recs: RecordInput[],
  keyFile: string,
  signer = generateSigner(),
  onPack?: (pack: string, recordsDone: number) => void,
) {
  const breakGlass = decodeKeyFile(readFileSync(`${keyFile}.pub`, 'utf8'), 'recipient-public').key;
  const w = await createChunkedWriter({
    store: createFsStore({ root: bucket }),
    job: JOB,
    runId,
    prevRunId: null,
    signerSecretKey: signer.secretKey,
    recipients: { operational: generateRecipient().publicKey, breakGlass },
    source: { type: 'files', binding: 'main', origin: '/srv/data' },
    chunking: { minSize: 2048, avgSize: 8192, maxSize: 65536 },
    packSize: 128 * 1024,
    ...(onPack
      ? { onPack: (e: { pack: string; recordsDone: number }) => onPack(e.pack, e.recordsDone) }
      : {}),
  });
  for (const r of recs) await w.addRecord(r);
  await w.finish();
  return signer;
}

async function fixture(dir: string): Promise<Fixture> {
  const bucket = join(dir, 'bucket');
  const key = join(dir, 'break-glass.key');
  const kg = await runCli(['keygen', '--out', key]);
  if (kg.code !== 0) throw new Error(kg.stderr);
  // The packs sealed while the big record (index 41) was being added hold its chunks alone.
  const bigPacks: string[] = [];
  const signer = await writeRun(bucket, 'r1', records(), key, generateSigner(), (pack, done) => {
    if (done === 41) bigPacks.push(pack);
  });
  // Two records of one name from two namespaces: their paths get binding/namespace directories.
  await writeRun(
    bucket,
    'multi',
    [
      { name: 'same.txt', body: Buffer.from('from a\n'), namespace: 'a' },
      { name: 'same.txt', body: Buffer.from('from b\n'), namespace: 'b' },
      ...records().slice(0, 6),
    ],
    key,
    signer,
  );
  // Two records mapping to one path.
  await writeRun(
    bucket,
    'clash',
    [
      ...records().slice(0, 3),
      { name: 'd0/f00.txt', body: Buffer.from('again\n') },
      ...records().slice(3, 5),
    ],
    key,
    signer,
  );
  // More records than a window of the index stream (4,096): three windows.
  await writeRun(
    bucket,
    'many',
    Array.from({ length: 9000 }, (_, i) => ({ name: `m/${i % 90}/${i}`, body: Buffer.from(`${i}\n`) })),
    key,
    signer,
  );
  return { dir, bucket, key, pin: fingerprint(signer.publicKey), bigPack: bigPacks.at(-2)! };
}

let f: Fixture;
t.before(async () => {
  f = await fixture(tempDir(t, 'coffer-recover-passes-'));
});

/** Every file under `dir` with its bytes' length and mode, relative, sorted. */
function tree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const p = join(e.parentPath, e.name);
      const st = statSync(p);
      return `${p.slice(dir.length + 1)} ${st.size} ${(st.mode & 0o777).toString(8)}`;
    })
    .sort();
}

let n = 0;
/** Extracts with `hold` as the hold limit into a fresh directory (or `to`); returns the result and the tree. */
async function extract(hold: string, run: string, rest: string[] = [], to?: string) {
  const out = to ?? join(f.dir, `out-${n++}`);
  const r = await runCli(
    cliArgs(
      'extract',
      { from: f.bucket, run, key: f.key, to: out },
      '--pin-signer',
      f.pin,
      '--json',
      ...rest,
    ),
    {
      env: { COFFER_RECOVER_HOLD_RECORDS: hold },
    },
  );
  return { r, out, files: tree(out) };
}

/** The result document with its target directory taken out (each extract has its own). */
function resultOf(r: CliResult, out: string): unknown {
  const doc = JSON.parse(r.stdout);
  return JSON.parse(JSON.stringify(doc).replaceAll(out, '<to>'));
}

/** The one-line error with its target directory taken out. */
const errorOf = (r: CliResult, out: string) => r.stderr.trim().split('\n').at(-1)!.replaceAll(out, '<to>');

t.test('in passes, a whole run, a selection and a multi-source run come out as held', async (t) => {
  for (const [run, rest] of [
    ['r1', []],
    ['r1', ['--include', 'd1/', '--include', 'big/']],
    ['r1', ['--exclude', 'd']],
    ['r1', ['--record', 'z/tail-3', '--record', 'empty']],
    ['multi', []],
    ['many', []],
    ['many', ['--exclude', 'm/1']],
  ] as const) {
    const held = await extract('1000', run, [...rest]);
    t.equal(held.r.code, 0, `${run} ${rest.join(' ')}: held: ${held.r.stderr}`);
    for (const hold of ['0', '7']) {
      const passes = await extract(hold, run, [...rest]);
      t.equal(passes.r.code, 0, `${run} ${rest.join(' ')}, hold ${hold}: in passes: ${passes.r.stderr}`);
      t.same(
        passes.files,
        held.files,
        `${run} ${rest.join(' ')}, hold ${hold}: the same files, sizes and modes`,
      );
      t.same(resultOf(passes.r, passes.out), resultOf(held.r, held.out), 'the same result document');
      for (const file of held.files.slice(0, 3)) {
        const name = file.split(' ')[0]!;
        t.same(
          readFileSync(join(passes.out, name)),
          readFileSync(join(held.out, name)),
          `${name}: the same bytes`,
        );
      }
    }
  }
  const whole = await extract('0', 'r1');
  t.equal(JSON.parse(whole.r.stdout).written.length, 52, 'every record is listed as written');
  t.ok(whole.files.includes(`big/five.bin ${5 * 1024 * 1024} 600`), 'the big record, with its mode');
});

t.test('in passes, every refusal comes before anything is written, as held', async (t) => {
  const cases: { what: string; run: string; rest: string[]; prepare?: (out: string) => void }[] = [
    { what: 'a --record that does not exist', run: 'r1', rest: ['--record', 'z/tail-3', '--record', 'nope'] },
    { what: 'an --include that matches nothing', run: 'r1', rest: ['--include', 'nothing/'] },
    { what: 'two records mapping to one path', run: 'clash', rest: [] },
    {
      what: 'a file already at a record path (the last record)',
      run: 'r1',
      rest: [],
      prepare: (out) => {
        rmSync(out, { recursive: true, force: true });
        const p = join(out, 'z');
        mkdirSync(p, { recursive: true });
        writeFileSync(join(p, 'tail-9'), 'mine');
      },
    },
  ];
  for (const c of cases) {
    const outs = [join(f.dir, `refuse-${n++}`), join(f.dir, `refuse-${n++}`)];
    c.prepare?.(outs[0]!);
    c.prepare?.(outs[1]!);
    const before = tree(outs[0]!);
    const held = await extract('1000', c.run, c.rest, outs[0]);
    const passes = await extract('0', c.run, c.rest, outs[1]);
    t.not(held.r.code, 0, `${c.what}: held refuses`);
    t.equal(passes.r.code, held.r.code, `${c.what}: the same exit code (${held.r.code})`);
    t.equal(errorOf(passes.r, outs[1]!), errorOf(held.r, outs[0]!), `${c.what}: the same message`);
    t.same(passes.files, before, `${c.what}: nothing written in passes`);
    t.same(held.files, before, `${c.what}: nothing written held`);
  }
});

t.test('in passes, a pack gone in the middle: the records before it are written, it never is', async (t) => {
  const bucket = join(f.dir, 'damaged');
  cpSync(f.bucket, bucket, { recursive: true });
  const victim = readdirSync(join(bucket, 'jobs', JOB, 'packs'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name === `${f.bigPack}.bin` && e.parentPath.includes('/data'))
    .map((e) => join(e.parentPath, e.name))[0]!;
  rmSync(victim);
  const results = [];
  for (const hold of ['1000', '0']) {
    const out = join(f.dir, `damaged-${hold}`);
    const r = await runCli(
      cliArgs('extract', { from: bucket, run: 'r1', key: f.key, to: out }, '--pin-signer', f.pin),
      { env: { COFFER_RECOVER_HOLD_RECORDS: hold } },
    );
    results.push({ r, out, files: tree(out) });
  }
  const [held, passes] = results as [(typeof results)[0], (typeof results)[0]];
  t.equal(held.r.code, 3, `held: exit 3 (${held.r.stderr.trim()})`);
  t.equal(passes.r.code, held.r.code, 'in passes: the same exit');
  t.equal(
    errorOf(passes.r, passes.out),
    errorOf(held.r, held.out),
    'the same message, naming the record and pack',
  );
  t.match(errorOf(passes.r, passes.out), /record "?big\/five\.bin/, 'the record whose pack is gone');
  t.ok(!passes.files.some((l) => l.startsWith('big/')), 'the record never appears');
  t.same(
    passes.files.filter((l) => l.startsWith('d')),
    held.files.filter((l) => l.startsWith('d')),
    'the records before it were written, as held',
  );
  t.ok(passes.files.length >= 40, `the 40 small records before it were written (${passes.files.length})`);
});

t.test('a hold limit that is not a number of records is refused', async (t) => {
  const out = join(f.dir, `bad-${n++}`);
  const r = await extract('lots', 'r1', [], out);
  t.equal(r.r.code, 2, 'a usage error');
  t.match(r.r.stderr, /COFFER_RECOVER_HOLD_RECORDS must be a whole number of records/);
  t.notOk(existsSync(out), 'nothing written');
});
