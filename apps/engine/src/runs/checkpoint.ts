/**
 * The engine's checkpoint row for one run (the specification's "per-run seal state object"): one
 * archive-writer checkpoint per destination plus the little the executor needs to line its
 * enumeration up again. Layout (JSON, UTF-8, stored opaque by @coffer/state):
 *
 *   { "v": 1, "runId", "job",
 *     "writers":  { "<destination>": "<base64url archive checkpoint>" },
 *     "failed":   { "<destination>": { "reason", "causeDigest" } },
 *     "vanished": [ { "at": <archive index>, "name": "<16 hex of sha384(name)>" } ] }
 *
 * Security-relevant behaviour: each archive checkpoint is already sealed to the operational key
 * and signed by the signer (@coffer/archive), so the data key never lies in the state store in the
 * clear and a state-store writer without the signer cannot plant one; record names appear only as
 * truncated digests. An envelope that does not parse is a hand-off refusal (`invalid-payload`).
 */
import { createHash } from 'node:crypto';
import { RunError } from './reasons.ts';

/** Unpadded base64url text (what encodeCheckpoint writes). */
const BASE64URL = /^[A-Za-z0-9_-]*$/;

export interface VanishedMark {
  /** Archive index the record would have had. */
  at: number;
  /** First 16 hex digits of SHA-384 of the record name. */
  name: string;
}

export interface RunCheckpoint {
  v: 1;
  runId: string;
  job: string;
  writers: Record<string, Uint8Array>;
  failed: Record<string, { reason: string; causeDigest: string }>;
  vanished: VanishedMark[];
}

export function nameMark(name: string): string {
  return createHash('sha384').update(name).digest('hex').slice(0, 16);
}

export function encodeCheckpoint(cp: RunCheckpoint): Uint8Array {
  const writers: Record<string, string> = {};
  // Node's native base64url: the writer checkpoint grows with the run (about 200 bytes per record),
  // and a pure-JS encoder over megabytes at every save showed up in the run's profile.
  for (const [k, v] of Object.entries(cp.writers))
    writers[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64url');
  return new TextEncoder().encode(
    JSON.stringify({ v: 1, runId: cp.runId, job: cp.job, writers, failed: cp.failed, vanished: cp.vanished }),
  );
}

/** Parses a stored envelope; throws RunError ERR_RUN_HANDOFF (`invalid-payload`) when malformed. */
export function decodeCheckpoint(bytes: Uint8Array, runId: string): RunCheckpoint {
  const bad = (why: string) =>
    new RunError('ERR_RUN_HANDOFF', `checkpoint envelope ${why}`, { handoffClass: 'invalid-payload' });
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw bad('does not parse');
  }
  const d = doc as Record<string, unknown>;
  if (typeof d !== 'object' || d === null || d.v !== 1 || d.runId !== runId || typeof d.job !== 'string')
    throw bad('is not for this run');
  const writers: Record<string, Uint8Array> = {};
  if (typeof d.writers !== 'object' || d.writers === null) throw bad('has no writers');
  for (const [k, v] of Object.entries(d.writers as Record<string, unknown>)) {
    // Buffer's decoder skips characters outside the alphabet, so the alphabet is checked first.
    if (typeof v !== 'string' || v.length % 4 === 1 || !BASE64URL.test(v))
      throw bad('has a malformed writer');
    writers[k] = new Uint8Array(Buffer.from(v, 'base64url'));
  }
  const failed = (
    typeof d.failed === 'object' && d.failed !== null ? d.failed : {}
  ) as RunCheckpoint['failed'];
  const vanished = Array.isArray(d.vanished)
    ? (d.vanished as unknown[]).filter(
        (m): m is VanishedMark =>
          typeof m === 'object' &&
          m !== null &&
          Number.isSafeInteger((m as VanishedMark).at) &&
          typeof (m as VanishedMark).name === 'string',
      )
    : [];
  return { v: 1, runId, job: d.job, writers, failed, vanished };
}
