/**
 * Posture tests' world: a fresh bucket on the loopback S3 server (credentials through the AWS
 * SDK's environment variables, as an operator gives them), the S3 destination URL for it and for a
 * bucket that does not exist, a break-glass public key file, and signed-in people by role.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { createS3Store, type ObjectStore } from '@coffer/objectstore';
import { createTestBucket, type TestBucket, tempDir } from '@coffer/testkit';
import type { Started } from '../helpers/engine.ts';

export const CONSOLE = 'https://console.coffer.test';

type T = { teardown(fn: () => void | Promise<void>): void };

export interface PostureWorld {
  dir: string;
  bucket: TestBucket;
  /** The bucket's root, to see every object written. */
  root: ObjectStore;
  /** `s3://` URL of the bucket under the prefix `dest`. */
  s3Url: string;
  /** `s3://` URL of a bucket that does not exist on the same server. */
  missingBucketUrl: string;
  /** A break-glass public key file. */
  breakGlassPub: string;
}

export async function postureWorld(t: T): Promise<PostureWorld> {
  const bucket = await createTestBucket('coffer-posture');
  process.env.AWS_ACCESS_KEY_ID = bucket.credentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = bucket.credentials.secretAccessKey;
  const dir = tempDir(t, 'coffer-posture-');
  const breakGlassPub = join(dir, 'bg.pub');
  writeFileSync(breakGlassPub, encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const q = `endpoint=${encodeURIComponent(bucket.endpoint)}&region=${bucket.region}&forcePathStyle=true`;
  return {
    dir,
    bucket,
    root: createS3Store({
      bucket: bucket.bucket,
      prefix: '',
      endpoint: bucket.endpoint,
      region: bucket.region,
      forcePathStyle: true,
      credentials: bucket.credentials,
    }),
    s3Url: `s3://${bucket.bucket}/dest?${q}`,
    missingBucketUrl: `s3://${bucket.bucket}-absent/dest?${q}`,
    breakGlassPub,
  };
}

/** Every key in `store` under `prefix`, sorted. */
export async function keysIn(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.listAll(prefix)) out.push(o.key);
  return out.sort();
}

/** Cookie and Origin headers of a fresh session for a person holding `role`. */
export async function session(e: Started, role: string): Promise<Record<string, string>> {
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.org`;
  await e.app.state.roles.assign({ subject: passkeySubject(email), email, role, grantedBy: 'test' });
  const s = await e.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
  return { cookie: `${SESSION_COOKIE}=${s.token}`, origin: CONSOLE };
}
