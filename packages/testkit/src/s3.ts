/**
 * The loopback S3-compatible server for tests. Settings come from `.test-services/s3.env`, written
 * by `scripts/services/s3.sh start` (radosgw, a one-node Ceph cluster that checks signatures and
 * conditional writes; or s3rver as a fallback, which does not). When the file is absent or the
 * server does not answer, the helper runs `s3.sh start` itself once per process. When that fails
 * too, it throws: a missing server is a test failure (in CI and locally), never a skip.
 * S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY and S3_KIND set in the environment
 * take precedence over the file (to run the tests against another server).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { readServiceEnv, repoRoot } from './tmp.ts';

export interface S3Endpoint {
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** radosgw checks signatures and If-None-Match; s3rver checks neither reliably. */
  kind: 'radosgw' | 's3rver';
}

export interface TestBucket {
  bucket: string;
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** Always true: the loopback servers only do path-style addressing. */
  forcePathStyle: true;
  kind: 'radosgw' | 's3rver';
}

function parse(env: Record<string, string> | null): S3Endpoint | null {
  if (env === null) return null;
  const { S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_KIND } = env;
  if (!S3_ENDPOINT || !S3_ACCESS_KEY_ID || !S3_SECRET_ACCESS_KEY) return null;
  return {
    endpoint: S3_ENDPOINT,
    region: S3_REGION || 'us-east-1',
    accessKeyId: S3_ACCESS_KEY_ID,
    secretAccessKey: S3_SECRET_ACCESS_KEY,
    kind: S3_KIND === 'radosgw' ? 'radosgw' : 's3rver',
  };
}

async function answers(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(endpoint, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

let pending: Promise<S3Endpoint> | undefined;

async function locate(): Promise<S3Endpoint> {
  // S3_ENDPOINT etc. in the environment point the tests at another server (e.g. a local MinIO).
  const fromEnv = parse(process.env as Record<string, string>);
  if (fromEnv !== null) return fromEnv;
  const found = parse(readServiceEnv('s3'));
  if (found !== null && (await answers(found.endpoint))) return found;
  const script = join(repoRoot(), 'scripts', 'services', 's3.sh');
  const run = spawnSync('bash', [script, 'start'], { encoding: 'utf8', timeout: 240_000 });
  const started = parse(readServiceEnv('s3'));
  if (run.status === 0 && started !== null && (await answers(started.endpoint))) return started;
  const why = (run.stderr || run.error?.message || '').trim().split('\n').slice(-5).join(' | ');
  throw new Error(
    `testkit: no S3-compatible test server (${process.env.CI === 'true' ? 'CI' : 'local'}); ` +
      `\`bash scripts/services/s3.sh start\` failed: ${why}`,
  );
}

/**
 * The loopback S3 server's endpoint and credentials. Starts the server when needed; throws when
 * no server can be had.
 */
export function s3Endpoint(): Promise<S3Endpoint> {
  pending ??= locate().catch((err) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

/**
 * Creates a fresh, empty bucket named `<prefix>-<random>` on the loopback server and returns what a
 * store needs to reach it. Buckets are not removed (the server's data is wiped on every start).
 */
export async function createTestBucket(prefix = 'coffer-test'): Promise<TestBucket> {
  const ep = await s3Endpoint();
  const base =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .replace(/^-+/, '')
      .slice(0, 40) || 'coffer-test';
  const bucket = `${base}-${randomBytes(6).toString('hex')}`;
  const credentials = { accessKeyId: ep.accessKeyId, secretAccessKey: ep.secretAccessKey };
  const client = new S3Client({
    endpoint: ep.endpoint,
    region: ep.region,
    forcePathStyle: true,
    credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (err) {
    // The SDK retries a create that timed out under load; the retry then finds the bucket its
    // first attempt made. The name carries 48 random bits, so an existing bucket is this one.
    const name = (err as { name?: string }).name;
    if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw err;
  } finally {
    client.destroy();
  }
  return {
    bucket,
    endpoint: ep.endpoint,
    region: ep.region,
    credentials,
    forcePathStyle: true,
    kind: ep.kind,
  };
}
