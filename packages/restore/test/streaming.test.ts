/**
 * Drills and dry runs stream records (issue 13 item 8): a run whose only record is 512 MiB of
 * incompressible bytes is drilled into a files scratch target and dry-run, each in a child process
 * of its own, and each child's peak resident set size stays below three quarters of the record's
 * size (measured: about 250 MiB, the runtime, a codec worker and 8 MiB shard buffers the collector
 * has not yet freed). A drill that read the record whole (as it did: the record plus a copy of
 * every piece) peaks above twice the record's size. Memory is what is asserted here, never time.
 */
const BOUND = 0.75;

import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createArchiveWriter } from '@coffer/archive';
import { encodeKeyFile } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { fsStore, keys } from './helpers.ts';

const RECORD = 512 * 1024 * 1024;
const CHUNK = 1024 * 1024;

/** xorshift32 bytes: cheap, and no compressor shrinks them. */
async function* noise(size: number, seed = 0x9e3779b9): AsyncIterable<Uint8Array> {
  let x = seed >>> 0;
  for (let done = 0; done < size; done += CHUNK) {
    const words = new Uint32Array(Math.min(CHUNK, size - done) / 4);
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      words[i] = x >>> 0;
    }
    yield new Uint8Array(words.buffer);
  }
}

const base = tempDir(t, 'restore-streaming-');
const destRoot = join(base, 'dest');
const k = keys();
const w = await createArchiveWriter({
  store: fsStore(destRoot),
  job: 'big',
  runId: 'run-big',
  prevRunId: null,
  signerSecretKey: k.signer.secretKey,
  recipients: { operational: k.operational.publicKey, breakGlass: k.breakGlass.publicKey },
  source: { type: 'files', binding: 'big', namespace: 'big' },
});
await w.addRecord({ name: 'disk.img', body: noise(RECORD), metadata: {} });
await w.finish();
const keyFile = join(base, 'operational.key');
writeFileSync(keyFile, encodeKeyFile('recipient-secret', k.operational.secretKey), { mode: 0o600 });

async function child(mode: 'drill' | 'dry-run', scratch: string): Promise<Record<string, unknown>> {
  mkdirSync(scratch, { recursive: true });
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(import.meta.dirname, 'streaming-child.ts'), mode, destRoot, keyFile, scratch, 'run-big', 'big'],
    { maxBuffer: 1024 * 1024, env: { ...process.env, COFFER_ARCHIVE_WORKERS: '1' } },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
}

t.test('a drill of a 512 MiB record never holds it whole', async (t) => {
  const scratch = join(base, 'scratch-drill');
  const r = await child('drill', scratch);
  t.match(r, { verdict: 'pass', records: 1, matched: 1, bytes: RECORD });
  t.ok(
    (r.maxRssBytes as number) < RECORD * BOUND,
    `peak RSS ${Math.round((r.maxRssBytes as number) / 2 ** 20)} MiB`,
  );
  t.same(readdirSync(scratch), [], 'the scratch copy is removed');
});

t.test('a dry run of a 512 MiB record never holds it whole', async (t) => {
  const r = await child('dry-run', join(base, 'scratch-dry'));
  t.match(r, { ok: true, recordsVerified: 1, bytes: RECORD });
  t.ok(
    (r.maxRssBytes as number) < RECORD * BOUND,
    `peak RSS ${Math.round((r.maxRssBytes as number) / 2 ** 20)} MiB`,
  );
});
