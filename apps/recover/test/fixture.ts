// Builds a real bucket (fs store in a temp dir) with runs written by @coffer/archive's writer,
// keys from @coffer/crypto and the break-glass key from the real `coffer-recover keygen`.
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createArchiveWriter, type RecordInput } from '@coffer/archive';
import {
  type Digest,
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  generateSigner,
  type SignerKeyPair,
} from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { runCli } from './helpers.ts';

export interface FixtureRecord {
  name: string;
  data: Buffer;
  metadata?: RecordInput['metadata'];
  namespace?: string;
}

export interface Fixture {
  dir: string;
  bucket: string;
  breakGlassKey: string;
  operationalKey: string;
  signer: SignerKeyPair;
  signerFingerprint: Digest;
  records: FixtureRecord[];
  /** job -> run ids in order */
  runs: Record<string, string[]>;
}

/** Deterministic pseudo-random bytes (no timing, no flakiness). */
export function pseudoRandom(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

export const RECORDS: FixtureRecord[] = [
  {
    name: 'docs/readme.txt',
    data: Buffer.from('hello from coffer\n'),
    metadata: { contentType: 'text/plain', mode: 0o640, mtime: '2024-01-02T03:04:05.000Z' },
  },
  { name: 'docs/data.bin', data: pseudoRandom(300 * 1024, 7) },
  { name: 'empty', data: Buffer.alloc(0) },
  { name: 'photos/🐈 cat.jpg', data: pseudoRandom(5000, 11) },
  { name: '../escape.txt', data: Buffer.from('must stay inside\n') },
  { name: 'logs/app.log', data: Buffer.from('line of log text, compressible\n'.repeat(20000)) },
  { name: 'user:42:profile', data: Buffer.from('{"name":"x"}') },
];

export async function writeRun(
  bucket: string | ObjectStore,
  job: string,
  runId: string,
  prevRunId: string | null,
  signer: SignerKeyPair,
  recipients: { operational: Uint8Array; breakGlass: Uint8Array },
  records: FixtureRecord[],
): Promise<void> {
  const store = typeof bucket === 'string' ? createFsStore({ root: bucket }) : bucket;
  const writer = await createArchiveWriter({
    store,
    job,
    runId,
    prevRunId,
    signerSecretKey: signer.secretKey,
    recipients,
    source: { type: 'files', binding: 'main', namespace: '', origin: '/srv/data' },
    shardSize: 64 * 1024,
  });
  for (const r of records) {
    await writer.addRecord({
      name: r.name,
      body: r.data,
      size: r.data.byteLength,
      ...(r.metadata ? { metadata: r.metadata } : {}),
      ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
    });
  }
  await writer.finish();
}

/** A bucket with job "nightly" (runs r1, r2) and job "weekly" (run w1). */
export async function buildFixture(dir: string): Promise<Fixture> {
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
  await writeRun(bucket, 'nightly', 'r1', null, signer, recipients, RECORDS);
  await writeRun(bucket, 'nightly', 'r2', 'r1', signer, recipients, RECORDS.slice(0, 2));
  await writeRun(bucket, 'weekly', 'w1', null, signer, recipients, [
    { name: 'same', data: Buffer.from('from main'), namespace: 'a' },
    { name: 'same', data: Buffer.from('from other'), namespace: 'b' },
  ]);
  return {
    dir,
    bucket,
    breakGlassKey,
    operationalKey,
    signer,
    signerFingerprint: fingerprint(signer.publicKey),
    records: RECORDS,
    runs: { nightly: ['r1', 'r2'], weekly: ['w1'] },
  };
}

/** A copy of the fixture's bucket to damage without disturbing other tests. */
export function copyBucket(f: Fixture, name: string): string {
  const copy = join(f.dir, name);
  cpSync(f.bucket, copy, { recursive: true });
  return copy;
}
