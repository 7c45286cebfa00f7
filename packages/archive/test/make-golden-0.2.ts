/**
 * Regenerates the golden archive of format 0.2 under test/fixtures/golden-0.2/ (run from the repo
 * root: `node packages/archive/test/make-golden-0.2.ts`). It also exports the fixed inputs, which
 * golden-0.2.test.ts regenerates to compare every record's bytes; importing this module writes
 * nothing. The keys are fresh, test-only and committed beside the archive. Run it only when
 * deliberately creating a new fixture: the committed one must stay readable by every later release,
 * so a change to the format that breaks it is a format break.
 *
 * Job `golden` is a two-run chain: run-0001 stores everything; run-0002 is built on run-0001
 * (`loadChunkedBase`) with one record rewritten, the large one modified in the middle (same size),
 * one added, one removed and the rest unchanged (same change token: their bodies are never read).
 * Job `other` holds one run of the same data as golden's run-0001 under its own chunk key (the
 * cross-job variants of the test need a pack of another job holding the same bytes).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeKeyFile, generateRecipient, generateSigner } from '@coffer/crypto';
import { createFsStore } from '@coffer/objectstore';
import {
  type ArchiveRecipients,
  type ChunkedBase,
  createChunkedWriter,
  loadChunkedBase,
  type RecordInput,
} from '../src/index.ts';
import { pseudoRandom, text } from './helpers.ts';

/** Small chunks and packs, so the fixture stays a few hundred KiB yet spans many chunks and packs. */
export const GOLDEN_CHUNKING = { minSize: 2048, avgSize: 8192, maxSize: 65536 };
export const GOLDEN_PACK_SIZE = 64 * 1024;
export const GOLDEN_SOURCE = {
  type: 'files',
  binding: 'golden-data',
  namespace: 'main',
  origin: '/srv/golden',
};
/** Fixed times (startedAt = sealedAt) of each run. */
export const GOLDEN_RUNS = [
  { job: 'golden', runId: 'run-0001', prevRunId: null, inputs: 1, at: '2025-03-01T00:00:00.000Z' },
  { job: 'golden', runId: 'run-0002', prevRunId: 'run-0001', inputs: 2, at: '2025-03-02T00:00:00.000Z' },
  { job: 'other', runId: 'run-0001', prevRunId: null, inputs: 1, at: '2025-03-01T12:00:00.000Z' },
] as const;

/** The large record: 160 KiB of pseudo-random bytes (about twenty chunks at these parameters). */
export const BIG_SIZE = 160 * 1024;
/** Where run-0002 rewrites 1000 bytes of the large record (its middle); the size stays the same. */
export const BIG_EDIT_AT = 80 * 1024;

/** A golden record with its bytes always materialised (the test compares them). */
export type GoldenRecord = RecordInput & { body: Uint8Array; change: string };

function bigBody(run: 1 | 2): Uint8Array {
  const b = pseudoRandom(BIG_SIZE, 5);
  if (run === 2) b.set(pseudoRandom(1000, 55), BIG_EDIT_AT);
  return b;
}

/**
 * The records of golden's run `run` (1 or 2), in the order they are written, with the bytes a
 * reader must get back. In run 2 a record with the same change token as in run 1 has the same bytes.
 */
export function goldenRecords02(run: 1 | 2): GoldenRecord[] {
  const enc = (s: string) => new TextEncoder().encode(s);
  const out: GoldenRecord[] = [
    {
      name: 'hello.txt',
      body: enc('hello from the 0.2 golden archive\n'),
      change: 'ino=11;size=34;mtime=1740787200',
      metadata: { contentType: 'text/plain', mode: 420 },
    },
    run === 1
      ? {
          name: 'logs/app.log',
          body: text(20_000, 1),
          change: 'ino=12;size=20000;mtime=1740787201',
          metadata: { contentType: 'text/plain', mtime: '2025-02-28T23:59:59.000Z' },
        }
      : {
          name: 'logs/app.log',
          body: text(21_000, 2),
          change: 'ino=12;size=21000;mtime=1740873601',
          metadata: { contentType: 'text/plain', mtime: '2025-03-01T23:59:59.000Z' },
        },
    {
      name: 'blob.bin',
      body: pseudoRandom(30_000, 3),
      change: 'ino=13;size=30000;mtime=1740787202',
      metadata: { contentType: 'application/octet-stream' },
    },
    { name: 'empty', body: new Uint8Array(0), change: 'ino=14;size=0;mtime=1740787203', metadata: {} },
    {
      name: 'big.bin',
      body: bigBody(run),
      change: run === 1 ? 'ino=15;size=163840;mtime=1740787204' : 'ino=15;size=163840;mtime=1740873604',
      metadata: { contentType: 'application/octet-stream' },
    },
    {
      name: 'ünïcødé/日本語/😀 file.txt',
      body: enc('grüße\n'),
      change: 'ino=16;size=8;mtime=1740787205',
      metadata: {},
    },
    {
      name: 'kv/session:42',
      namespace: 'sessions',
      sourceType: 'redis',
      body: enc('{"user":42}'),
      change: 'redis-version=7',
      metadata: { expiresAt: '2030-01-01T00:00:00.000Z', ttlSeconds: 3600 },
    },
  ];
  if (run === 1) {
    out.push({
      name: 'tmp/scratch.bin',
      body: pseudoRandom(5000, 8),
      change: 'ino=17;size=5000;mtime=1740787206',
      metadata: {},
    });
  } else {
    out.push({
      name: 'notes/new.txt',
      body: text(6000, 9),
      change: 'ino=18;size=6000;mtime=1740873606',
      metadata: { contentType: 'text/plain' },
    });
  }
  return out;
}

/** Names whose record run 2 takes from run 1 unread (same change token). */
export function unchangedInRun2(): Set<string> {
  const first = new Map(goldenRecords02(1).map((r) => [r.name, r.change]));
  return new Set(
    goldenRecords02(2)
      .filter((r) => first.get(r.name) === r.change)
      .map((r) => r.name),
  );
}

/** A body that throws when read: the writer must reference an unchanged record without reading it. */
function unreadable(): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      throw new Error('an unchanged golden record was read');
    },
  };
}

async function main(): Promise<void> {
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'golden-0.2');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'keys'), { recursive: true });
  const signer = generateSigner();
  const operational = generateRecipient();
  const breakGlass = generateRecipient();
  const keyFiles: [string, string][] = [
    ['signer.key', encodeKeyFile('signer-secret', signer.secretKey)],
    ['signer.pub', encodeKeyFile('signer-public', signer.publicKey)],
    ['operational.key', encodeKeyFile('recipient-secret', operational.secretKey)],
    ['operational.pub', encodeKeyFile('recipient-public', operational.publicKey)],
    ['break-glass.key', encodeKeyFile('recipient-secret', breakGlass.secretKey)],
    ['break-glass.pub', encodeKeyFile('recipient-public', breakGlass.publicKey)],
  ];
  for (const [name, content] of keyFiles) writeFileSync(join(dir, 'keys', name), content);
  writeFileSync(
    join(dir, 'README.txt'),
    'Golden archive of format 0.2 (incremental, deduplicated runs; test-only keys). Generated by\n' +
      'packages/archive/test/make-golden-0.2.ts; read on every test run by golden-0.2.test.ts.\n' +
      'Job golden: run-0001 stores every chunk, run-0002 builds on it (one record rewritten, the\n' +
      'large one changed in the middle, one added, one removed, the rest referenced unread).\n' +
      'Job other: one run of the same data under its own chunk key.\n' +
      'Never regenerate it to make a test pass: a reader that cannot read it has broken the format.\n',
  );

  const store = createFsStore({ root: join(dir, 'store') });
  const recipients: ArchiveRecipients = {
    operational: operational.publicKey,
    breakGlass: breakGlass.publicKey,
  };
  const unchanged = unchangedInRun2();
  for (const run of GOLDEN_RUNS) {
    let base: ChunkedBase | null = null;
    if (run.prevRunId !== null) {
      base = await loadChunkedBase(store, {
        job: run.job,
        runId: run.prevRunId,
        secretKey: operational.secretKey,
        signerPublicKey: signer.publicKey,
      });
      if (base === null) throw new Error(`${run.job}/${run.prevRunId} is not a 0.2 run`);
    }
    const w = await createChunkedWriter({
      store,
      job: run.job,
      runId: run.runId,
      prevRunId: run.prevRunId,
      signerSecretKey: signer.secretKey,
      recipients,
      source: GOLDEN_SOURCE,
      base,
      chunking: GOLDEN_CHUNKING,
      packSize: GOLDEN_PACK_SIZE,
      now: () => new Date(run.at),
    });
    let reused = 0;
    for (const r of goldenRecords02(run.inputs)) {
      const skip = base !== null && unchanged.has(r.name);
      if (skip) {
        reused++;
        if (!w.wouldReuse({ name: r.name, size: r.body.length, change: r.change }))
          throw new Error(`${r.name} would be read again`);
      }
      await w.addRecord(skip ? { ...r, body: unreadable(), size: r.body.length } : r);
    }
    const s = await w.finish();
    if (s.unchangedRecords !== reused)
      throw new Error(`${s.unchangedRecords} records reused, ${reused} expected`);
    console.log(
      `${run.job}/${run.runId}: ${s.records} records, ${s.chunks} chunks (${s.newChunks} new, ` +
        `${s.newBytes} of ${s.bytes} bytes), ${s.newPacks} new packs, ${s.unchangedRecords} unread, ` +
        `${s.storedBytes} bytes stored`,
    );
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) await main();
