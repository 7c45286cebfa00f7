/**
 * One canary flight: the proof that this engine build can still back up to a destination.
 *
 * Algorithm (`flyOnce`, into a store already confined to the canary namespace):
 *  1. Generate a few KiB of records: JSON text (compressible, so the zstd path runs), random
 *     bytes (stored as they are) and one empty record.
 *  2. Seal them with `@coffer/archive`'s writer exactly as a run does: a fresh data key wrapped to
 *     the operational and break-glass recipients, the manifest signed by the engine's hybrid signer,
 *     job `canary`, the flight id as run id (`_canary/jobs/canary/runs/<flight>/`).
 *  3. Read the archive back with `verifyRun`: format version, signature pinned to the engine's own
 *     signer, key unwrap with the operational key, index and shard digests, AEAD tags, record
 *     hashes; then open it again and compare every record's name and bytes with what was written.
 *  4. The verdict: `alive` when all of that held; `undecided` when the destination was only
 *     throttled or unreachable (or the flight ran out of time); `dead` when the destination refused
 *     the write or the read with a lasting error (access denied, rejected, missing) or anything read
 *     back differed (a signature, digest, tag or byte).
 * `sweep` then removes older flights' objects (never the one just flown, never one started less
 * than the grace period ago: another replica may be flying it).
 *
 * When the engine has no break-glass public key yet (runs refuse to seal then), the flight seals
 * to a one-off break-glass stand-in made for it and discarded: the canary's records are generated
 * and worthless, and the seal, sign and verify path is the same.
 *
 * Security-relevant behaviour: never throws; an outcome carries a code from a closed family and a
 * fixed message, never an error's text (which can name an endpoint or a key); the store is
 * confined to `_canary/` (store.ts), so nothing else in the destination can be written or deleted.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createArchiveWriter, openRun, verifyRun } from '@coffer/archive';
import { generateRecipient } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { type WatchedStore, watchedStore } from './store.ts';
import type { CanaryVerdict } from './types.ts';

/** The archive job id of every canary flight. */
export const CANARY_JOB = 'canary';
/** Where flights' archives live inside the canary namespace. */
export const CANARY_RUNS_PREFIX = `jobs/${CANARY_JOB}/runs/`;

/**
 * The canary's own codes in a flight's `code` (beside the ERR_OBJECTSTORE_* and ERR_ARCHIVE_*
 * codes of the packages); docs/errors.md lists them.
 */
export const CANARY_ERROR_CODES = [
  'ERR_CANARY_TIMEOUT',
  'ERR_CANARY_MISMATCH',
  'ERR_CANARY_INTERNAL',
] as const;

export interface CanaryKeys {
  signer: { secretKey: Uint8Array; publicKey: Uint8Array };
  operational: { secretKey: Uint8Array; publicKey: Uint8Array };
  breakGlass: { publicKey: Uint8Array } | null;
}

export interface FlightOptions {
  /** The flight id (a run id: sortable, path-safe). */
  id: string;
  keys: CanaryKeys;
  engineVersion: string;
  /** The flight gives up after this long (undecided, ERR_CANARY_TIMEOUT). */
  timeoutMs: number;
  /** Archive worker threads (default: the archive's default, as runs). */
  workers?: number;
}

export interface FlightOutcome {
  verdict: CanaryVerdict;
  code: string | null;
  message: string | null;
  /** Stored bytes of the sealed archive (0 when it was not sealed). */
  bytes: number;
}

interface CanaryRecord {
  name: string;
  body: Uint8Array;
  contentType: string;
}

/** About 4.5 KiB: eight JSON records, eight random ones and an empty one. */
export function canaryRecords(id: string, engineVersion: string): CanaryRecord[] {
  const out: CanaryRecord[] = [];
  for (let i = 0; i < 8; i++) {
    const text = JSON.stringify({
      canary: id,
      record: i,
      engineVersion,
      note: 'coffer integrity canary: generated records, no backup data',
      filler: 'abcdefghijklmnopqrstuvwxyz'.repeat(8),
    });
    out.push({
      name: `records/${String(i).padStart(2, '0')}.json`,
      body: new Uint8Array(Buffer.from(text, 'utf8')),
      contentType: 'application/json',
    });
  }
  for (let i = 0; i < 8; i++) {
    out.push({
      name: `records/${String(i).padStart(2, '0')}.bin`,
      body: new Uint8Array(randomBytes(256)),
      contentType: 'application/octet-stream',
    });
  }
  out.push({ name: 'records/empty', body: new Uint8Array(0), contentType: 'application/octet-stream' });
  return out;
}

/** A code made safe for a message: the closed alphabet of store and engine codes, else `unknown`. */
export function safeCode(code: unknown): string {
  return typeof code === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(code) ? code : 'unknown';
}

const TRANSIENT = new Set(['ERR_OBJECTSTORE_THROTTLED', 'ERR_OBJECTSTORE_FAULT']);

interface ChainFacts {
  /** The innermost object-store code (ERR_OBJECTSTORE_*), from an error or an archive wrapper. */
  storeError: string | null;
  /** The store's own code (an S3 code such as AccessDenied), sanitised. */
  storeCode: string | null;
  /** The first code of the chain (ERR_ARCHIVE_*, ERR_CANARY_*, ...). */
  code: string | null;
}

function chainFacts(error: unknown): ChainFacts {
  const facts: ChainFacts = { storeError: null, storeCode: null, code: null };
  const seen = new Set<unknown>();
  let e: unknown = error;
  while (e !== null && typeof e === 'object' && !seen.has(e) && seen.size < 16) {
    seen.add(e);
    const c = e as { code?: unknown; storeErrorCode?: unknown; storeCode?: unknown; cause?: unknown };
    if (typeof c.code === 'string') {
      facts.code ??= safeCode(c.code);
      if (c.code.startsWith('ERR_OBJECTSTORE_')) facts.storeError = safeCode(c.code);
    }
    if (typeof c.storeErrorCode === 'string') facts.storeError = safeCode(c.storeErrorCode);
    if (typeof c.storeCode === 'string') facts.storeCode = safeCode(c.storeCode);
    e = c.cause;
  }
  return facts;
}

class CanaryError extends Error {
  readonly code: string;
  constructor(code: string) {
    super(code);
    this.name = 'CanaryError';
    this.code = code;
  }
}

type Phase = 'write' | 'read';

/**
 * The outcome of a flight that failed in `phase` with `error`: undecided for a throttle, a store
 * fault (network, timeouts) or the flight's own timeout; dead for every other store refusal and
 * for anything else (a build that cannot seal or verify is not alive).
 */
export function outcomeOf(error: unknown, phase: Phase): FlightOutcome {
  const f = chainFacts(error);
  if (f.code === 'ERR_CANARY_TIMEOUT')
    return undecided('ERR_CANARY_TIMEOUT', 'the flight ran out of time before it was read back');
  if (f.storeError !== null) {
    const detail = f.storeCode !== null ? `${f.storeError}, ${f.storeCode}` : f.storeError;
    const what = phase === 'write' ? 'write' : 'read-back';
    if (TRANSIENT.has(f.storeError)) {
      return f.storeError === 'ERR_OBJECTSTORE_THROTTLED'
        ? undecided(f.storeError, `the destination throttled the canary ${what} (${detail})`)
        : undecided(f.storeError, `the destination could not be reached for the canary ${what} (${detail})`);
    }
    return dead(f.storeError, `the destination refused the canary ${what} (${detail})`);
  }
  const code = f.code ?? 'ERR_CANARY_INTERNAL';
  return phase === 'write'
    ? dead(code, `the canary archive could not be sealed (${code})`)
    : dead(code, `read-back verification failed (${code})`);
}

const undecided = (code: string, message: string): FlightOutcome => ({
  verdict: 'undecided',
  code,
  message,
  bytes: 0,
});
const dead = (code: string, message: string): FlightOutcome => ({ verdict: 'dead', code, message, bytes: 0 });

/** Seals the records into `store` (confined to the canary namespace); returns the stored bytes. */
async function write(store: ObjectStore, o: FlightOptions, records: CanaryRecord[], gone: AbortSignal) {
  const breakGlass = o.keys.breakGlass?.publicKey ?? generateRecipient().publicKey;
  const writer = await createArchiveWriter({
    store,
    job: CANARY_JOB,
    runId: o.id,
    prevRunId: null,
    signerSecretKey: o.keys.signer.secretKey,
    recipients: { operational: o.keys.operational.publicKey, breakGlass },
    source: { type: 'canary', namespace: CANARY_JOB },
    writeRecovery: false,
    ...(o.workers !== undefined ? { workers: o.workers } : {}),
  });
  try {
    for (const r of records) {
      if (gone.aborted) throw new CanaryError('ERR_CANARY_TIMEOUT');
      await writer.addRecord({
        name: r.name,
        size: r.body.length,
        body: r.body,
        metadata: { contentType: r.contentType },
      });
    }
    if (gone.aborted) throw new CanaryError('ERR_CANARY_TIMEOUT');
    const summary = await writer.finish();
    if (summary.records !== records.length) throw new CanaryError('ERR_CANARY_MISMATCH');
    return summary.storedBytes;
  } catch (err) {
    await writer.abort().catch(() => undefined);
    throw err;
  }
}

const digest = (b: Uint8Array) => createHash('sha384').update(b).digest('hex');

/**
 * Reads the flight back: the whole-run verification (signature pinned to the engine's signer,
 * unwrap, digests, tags, record hashes), then every record's name and bytes against what was
 * written. Throws a CanaryError with the archive's failure code, or the store's error.
 */
async function readBack(store: WatchedStore, o: FlightOptions, records: CanaryRecord[]) {
  store.reset();
  const options = {
    job: CANARY_JOB,
    runId: o.id,
    secretKey: o.keys.operational.secretKey,
    signerPublicKey: o.keys.signer.publicKey,
    ...(o.workers !== undefined ? { workers: o.workers } : {}),
  };
  const verdict = await verifyRun(store, options);
  if (!verdict.ok) {
    // A destination fault during the read: the store's own error tells throttled from refused.
    const lastError = store.lastError as { code?: unknown } | null;
    const failure = verdict.failure?.code ?? 'ERR_ARCHIVE_INTERNAL';
    if (
      (failure === 'ERR_ARCHIVE_DESTINATION' || failure === 'ERR_ARCHIVE_NOT_FOUND') &&
      typeof lastError?.code === 'string'
    )
      throw lastError;
    throw new CanaryError(failure);
  }
  const total = records.reduce((n, r) => n + r.body.length, 0);
  if (
    !verdict.checks.signerPinned ||
    verdict.checks.records !== records.length ||
    verdict.checks.bytes !== total
  )
    throw new CanaryError('ERR_CANARY_MISMATCH');
  const run = await openRun(store, options);
  let i = 0;
  for await (const entry of run.records()) {
    const want = records[i++];
    if (want === undefined || entry.name !== want.name || entry.size !== want.body.length)
      throw new CanaryError('ERR_CANARY_MISMATCH');
    const pieces: Uint8Array[] = [];
    // Copies: the pieces may be views of the reader's pooled buffers.
    for await (const p of run.readRecord(entry)) pieces.push(new Uint8Array(p));
    if (digest(Buffer.concat(pieces)) !== digest(want.body)) throw new CanaryError('ERR_CANARY_MISMATCH');
  }
  if (i !== records.length) throw new CanaryError('ERR_CANARY_MISMATCH');
}

/** Flies one flight into `store` (the canary namespace of one destination). Never throws. */
export async function flyOnce(store: ObjectStore, o: FlightOptions): Promise<FlightOutcome> {
  const records = canaryRecords(o.id, o.engineVersion);
  const watched = watchedStore(store);
  const timeout = new AbortController();
  let phase: Phase = 'write';
  const work = (async (): Promise<FlightOutcome> => {
    const bytes = await write(watched, o, records, timeout.signal);
    phase = 'read';
    await readBack(watched, o, records);
    return { verdict: 'alive', code: null, message: null, bytes };
  })().catch((err: unknown) => outcomeOf(err, phase));
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<FlightOutcome>((resolve) => {
    timer = setTimeout(() => {
      timeout.abort();
      resolve(outcomeOf(new CanaryError('ERR_CANARY_TIMEOUT'), phase));
    }, o.timeoutMs);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

const FLIGHT_ID = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z-[0-9a-f]{8}$/;

/** The start time a flight id carries, or null when `id` is not a flight id. */
export function flightTime(id: string): number | null {
  const m = FLIGHT_ID.exec(id);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, ms] = m;
  const t = Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!, +ms!);
  return Number.isNaN(t) ? null : t;
}

/**
 * Deletes the objects of every earlier flight in the canary namespace of one destination, except
 * `keep` and flights that started after `before` (ms since the epoch; another replica may still
 * be flying them). Returns how many objects it removed. Throws the store's error.
 */
export async function sweep(store: ObjectStore, keep: string, before: number): Promise<number> {
  const doomed: string[] = [];
  for await (const o of store.listAll(CANARY_RUNS_PREFIX)) {
    const id = o.key.slice(CANARY_RUNS_PREFIX.length).split('/')[0] ?? '';
    const at = flightTime(id);
    if (id === keep || at === null || at >= before) continue;
    doomed.push(o.key);
  }
  for (const key of doomed) await store.delete(key);
  return doomed.length;
}
