/**
 * Nonce reuse on resume (docs/archive-format.md "Sealed frame", the per-session salt): an engine
 * killed with shards stored past its last checkpoint, then restarted after the source changed,
 * seals those shard numbers again under the run's same data key. On a versioned bucket every
 * version stays readable, so every version of every shard (and index) object must carry a nonce
 * that no other version carries.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import {
  GetObjectCommand,
  ListObjectVersionsCommand,
  type ObjectVersion,
  PutBucketVersioningCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { layout, listRuns, resumeArchiveWriter, verifyRun } from '@coffer/archive';
import { decodeKeyFile } from '@coffer/crypto';
import { createS3Store } from '@coffer/objectstore';
import { openState } from '@coffer/state';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { decodeCheckpoint } from '../../src/runs/checkpoint.ts';
import { bigSource, makeKeys, startDriver } from './helpers/procs.ts';

const MIB = 1024 * 1024;
const FILES = 12;

/** The nonce of each frame in a stored object, as the format defines it (header fields). */
function frameNonces(bytes: Uint8Array): string[] {
  const out: string[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let pos = 0; pos + 48 <= bytes.length; ) {
    const domain = bytes[pos + 2] === 0x49 ? 1 : 0; // "CFIX" or "CFSH"
    const flags = bytes[pos + 6]!;
    const salt = (flags & 4) !== 0 ? bytes.subarray(pos + 26, pos + 32) : new Uint8Array(6);
    out.push(`${domain}:${Buffer.from(salt).toString('hex')}:${view.getUint32(pos + 8)}:${flags & 1}`);
    pos += 32 + view.getUint32(pos + 16) + 16;
  }
  return out;
}

t.test('kill -9 past the checkpoint, change the source, resume: no version reuses a nonce', async (t) => {
  const root = tempDir(t, 'coffer-crash-nonce-');
  const source = join(root, 'source');
  bigSource(source, FILES, 4);
  const { breakGlassSecret } = makeKeys(join(root, 'keys'));
  const bucket = await createTestBucket('h13-nonce');
  const client = new S3Client({
    endpoint: bucket.endpoint,
    region: bucket.region,
    forcePathStyle: true,
    credentials: bucket.credentials,
  });
  t.teardown(() => client.destroy());
  await client.send(
    new PutBucketVersioningCommand({
      Bucket: bucket.bucket,
      VersioningConfiguration: { Status: 'Enabled' },
    }),
  );
  const versions = async (prefix: string): Promise<ObjectVersion[]> => {
    const out: ObjectVersion[] = [];
    let KeyMarker: string | undefined;
    let VersionIdMarker: string | undefined;
    for (;;) {
      const page = await client.send(
        new ListObjectVersionsCommand({ Bucket: bucket.bucket, Prefix: prefix, KeyMarker, VersionIdMarker }),
      );
      out.push(...(page.Versions ?? []));
      if (!page.IsTruncated) return out;
      KeyMarker = page.NextKeyMarker;
      VersionIdMarker = page.NextVersionIdMarker;
    }
  };
  const env = {
    DRIVER_DATA_DIR: join(root, 'data'),
    DRIVER_KEYS_DIR: join(root, 'keys'),
    DRIVER_DEST_S3: JSON.stringify(bucket),
    DRIVER_SOURCE_DIR: source,
    DRIVER_JOB: 'nonce',
    DRIVER_SHARD_SIZE: String(MIB),
    // Far apart: after the first save (at once) no other save lands before the kill.
    DRIVER_CHECKPOINT_MS: '600000',
  };
  let runId = '';
  let held = 0;
  let atKill = 0;
  const first = startDriver({ ...env, DRIVER_MODE: 'trigger' }, (l, child) => {
    if (l.event === 'run-started') runId = String(l.runId);
    if (l.event === 'run-checkpoint' && held === 0) {
      held = Number((l.shardsDone as Record<string, number>).default ?? 0);
      const poll = setInterval(async () => {
        if (child.exitCode !== null) return clearInterval(poll);
        const n = (await versions(layout.shardsPrefix('nonce', runId))).length;
        if (n >= held + 8 && atKill === 0) {
          clearInterval(poll);
          atKill = n;
          child.kill('SIGKILL');
        }
      }, 20);
    }
  });
  const killed = await first.exit;
  t.equal(killed.signal, 'SIGKILL', 'killed mid-run');
  t.ok(atKill >= held + 8, `${atKill} shards stored at the kill, the first save was asked at ${held}`);

  // Where the saved checkpoint really stopped (it is exported when the save runs, so it may hold
  // more than the shard count the save was requested for): record `recordsDone`, `bytesDone` in.
  const state = await openState({ dataDir: env.DRIVER_DATA_DIR });
  const row = await state.checkpoints.get(runId);
  await state.close();
  const keyFile = (f: string) => decodeKeyFile(readFileSync(join(root, 'keys', f), 'utf8')).key;
  const { writer, resume } = await resumeArchiveWriter(
    decodeCheckpoint(row!.sealed, runId).writers.default!,
    {
      store: createS3Store({ ...bucket }),
      signerSecretKey: keyFile('signer.key'),
      operationalSecretKey: keyFile('operational.key'),
      writeRecovery: false,
    },
  );
  await writer.abort();
  const names = readdirSync(source).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const at = resume.recordsDone;
  const from = resume.partial?.bytesDone ?? 0;
  t.ok(at < FILES - 2, `the checkpoint stopped in record ${at}, ${from} bytes in, before the kill point`);

  // The source changes while the engine is down: every byte past the checkpoint gets a new value
  // (the prefix of the record the checkpoint stopped in must stay: a resume re-hashes it).
  for (let i = at; i < FILES; i++) {
    const skip = i === at ? from : 0;
    if (skip >= 4 * MIB) continue;
    const fd = openSync(join(source, names[i]!), 'r+');
    writeSync(fd, randomBytes(4 * MIB - skip), 0, 4 * MIB - skip, skip);
    closeSync(fd);
  }

  const second = startDriver({ ...env, DRIVER_MODE: 'resume' }, () => undefined);
  t.equal((await second.exit).code, 0);
  const done = second.lines.find((l) => l.event === 'driver-done') as {
    runs: { id: string; status: string }[];
  };
  t.same(
    done.runs.map((r) => [r.id, r.status]),
    [[runId, 'ok']],
    `the resumed run ended ok: ${JSON.stringify(done.runs)}`,
  );
  t.ok(
    second.lines.some((l) => l.event === 'run-resumed' && l.runId === runId),
    'the same run resumed',
  );
  const store = createS3Store({ ...bucket });
  t.same(
    (await listRuns(store, 'nonce')).map((r) => r.runId),
    [runId],
    'one archive',
  );
  const verdict = await verifyRun(store, { job: 'nonce', runId, secretKey: breakGlassSecret });
  t.ok(verdict.ok, 'verifies with the break-glass key');

  const all = (await versions(`jobs/nonce/runs/${runId}/`)).filter((v) => v.Key?.endsWith('.bin'));
  const byNonce = new Map<string, string[]>();
  for (const v of all) {
    const got = await client.send(
      new GetObjectCommand({ Bucket: bucket.bucket, Key: v.Key, VersionId: v.VersionId }),
    );
    const bytes = await got.Body!.transformToByteArray();
    for (const n of frameNonces(bytes))
      byNonce.set(n, [...(byNonce.get(n) ?? []), `${v.Key}@${v.VersionId}`]);
  }
  const resealed = new Set(all.map((v) => v.Key)).size;
  t.ok(all.length > resealed, `${all.length - resealed} object versions were sealed again by the resume`);
  const reused = [...byNonce].filter(([, where]) => where.length > 1);
  t.same(reused, [], 'every stored version of every shard and index object has a nonce of its own');
});
