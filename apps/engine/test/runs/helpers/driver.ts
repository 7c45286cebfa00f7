/**
 * A child-process engine for crash and scale-out tests of the run machinery: the real RunService
 * over a real state store (SQLite in DRIVER_DATA_DIR, or DRIVER_DB_URL), real keys from files and a
 * real filesystem destination (or, with DRIVER_DEST_S3, a JSON @coffer/testkit TestBucket, that S3
 * bucket). Log lines are JSON on stdout. Modes:
 * - `trigger`: upsert the job, trigger it, wait until the run settles, exit;
 * - `resume`:  start the scheduler (its first tick resumes interrupted runs), wait until no run of
 *              the job is in flight, exit;
 * - `race`:    upsert the job, wait at a file barrier (DRIVER_BARRIER_DIR), trigger, report, wait, exit.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeKeyFile, recipientPublicKeyFromSecret, signerPublicKeyFromSecret } from '@coffer/crypto';
import { createFsStore, createS3Store, type ObjectStore } from '@coffer/objectstore';
import { openState } from '@coffer/state';
import { createRunService } from '../../../src/runs/service.ts';

const env = process.env;
const keysDir = env.DRIVER_KEYS_DIR!;
const key = (f: string) => decodeKeyFile(readFileSync(join(keysDir, f), 'utf8')).key;
const signerSecret = key('signer.key');
const opSecret = key('operational.key');
const keys = {
  signer: { secretKey: signerSecret, publicKey: signerPublicKeyFromSecret(signerSecret) },
  operational: { secretKey: opSecret, publicKey: recipientPublicKeyFromSecret(opSecret) },
  breakGlass: { publicKey: key('breakglass.pub') },
};
const print = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const log = {
  info: (o: Record<string, unknown>, msg: string) => print({ level: 'info', ...o, msg }),
  warn: (o: Record<string, unknown>, msg: string) => print({ level: 'warn', ...o, msg }),
  error: (o: Record<string, unknown>, msg: string) => print({ level: 'error', ...o, msg }),
};
const dataDir = env.DRIVER_DATA_DIR!;
mkdirSync(dataDir, { recursive: true });
function destination(): ObjectStore {
  if (env.DRIVER_DEST_S3) {
    const b = JSON.parse(env.DRIVER_DEST_S3) as {
      bucket: string;
      endpoint: string;
      region: string;
      credentials: { accessKeyId: string; secretAccessKey: string };
    };
    return createS3Store({ ...b, forcePathStyle: true });
  }
  mkdirSync(env.DRIVER_DEST_DIR!, { recursive: true });
  return createFsStore({ root: env.DRIVER_DEST_DIR! });
}
const state = await openState({ dataDir, ...(env.DRIVER_DB_URL ? { url: env.DRIVER_DB_URL } : {}) });
/**
 * The destination as the run sees it, instrumented for the fencing test: every manifest stored
 * (the commit point) is reported as `driver-manifest-put`; with DRIVER_PAUSE_AT_COMMIT the
 * commit's list-back of the shards reports `driver-commit-point` and waits DRIVER_PAUSE_MS first,
 * so the test can freeze this process (SIGSTOP) inside the commit.
 */
function instrumented(store: ObjectStore): ObjectStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop === 'put') {
        return async (key: string, ...rest: unknown[]) => {
          const r = await (value as (...a: unknown[]) => Promise<unknown>).call(target, key, ...rest);
          if (key.endsWith('/manifest.json')) print({ event: 'driver-manifest-put', key, pid: process.pid });
          return r;
        };
      }
      if (prop === 'listAll' && env.DRIVER_PAUSE_AT_COMMIT === '1') {
        return async function* (prefix: string, ...rest: unknown[]) {
          if (prefix.endsWith('/shards/')) {
            print({ event: 'driver-commit-point', prefix });
            await new Promise((r) => setTimeout(r, Number(env.DRIVER_PAUSE_MS ?? 1000)));
          }
          yield* (value as (...a: unknown[]) => AsyncIterable<unknown>).call(target, prefix, ...rest);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
const service = createRunService({
  state,
  keys,
  destinations: new Map([['default', instrumented(destination())]]),
  log,
  dataDir,
  leaseSeconds: Number(env.DRIVER_LEASE_SECONDS ?? 30),
  pollSeconds: 1,
  executor: {
    checkpointIntervalMs: Number(env.DRIVER_CHECKPOINT_MS ?? 0),
    ...(env.DRIVER_SHARD_SIZE ? { shardSize: Number(env.DRIVER_SHARD_SIZE) } : {}),
  },
});
const jobId = env.DRIVER_JOB ?? 'big';
const job = {
  id: jobId,
  cadenceSeconds: 3600,
  enabled: true,
  source: { type: 'files', path: env.DRIVER_SOURCE_DIR! },
  destinations: ['default'],
};
const mode = env.DRIVER_MODE ?? 'trigger';

async function settled(): Promise<void> {
  for (;;) {
    await service.idle();
    const latest = (await state.runs.listForJob(jobId, { limit: 1 }))[0];
    if (latest && latest.status !== 'running' && latest.status !== 'parked') return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

if (mode === 'trigger') {
  await state.jobs.upsert(job);
  print({ event: 'driver-trigger', result: await service.trigger(jobId) });
  await settled();
} else if (mode === 'resume') {
  service.start();
  await settled();
} else if (mode === 'race') {
  await state.jobs.upsert(job).catch(() => undefined);
  // Barrier: every racer announces itself and waits for the others, so they trigger together.
  const barrier = env.DRIVER_BARRIER_DIR!;
  mkdirSync(barrier, { recursive: true });
  writeFileSync(join(barrier, `${process.pid}`), 'ready');
  while (readdirSync(barrier).length < Number(env.DRIVER_BARRIER_COUNT ?? 2))
    await new Promise((r) => setTimeout(r, 5));
  print({ event: 'driver-trigger', result: await service.trigger(jobId) });
  await service.idle();
}
await service.stop();
const runs = await state.runs.listForJob(jobId);
print({
  event: 'driver-done',
  runs: runs.map((r) => ({ id: r.id, status: r.status, reason: r.reason, detail: r.detail })),
});
await state.close();
process.exit(0);
