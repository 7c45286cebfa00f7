/** The values that bind a frame to its job and run (see codec-core.ts for the framing). */
import { sha384 } from '@coffer/crypto';
import { concatBytes, lengthPrefixed, utf8 } from './bytes.ts';

const RUN_TAG_LABEL = utf8('coffer/archive/v0.1/run');

/** runTag = SHA-384("coffer/archive/v0.1/run" || lp(job) || lp(runId))[0..12]. */
export function runTag(job: string, runId: string): Uint8Array {
  return sha384(concatBytes(RUN_TAG_LABEL, lengthPrefixed(job), lengthPrefixed(runId))).slice(0, 12);
}

/** lp(job) || lp(runId), the tail of every frame's associated data. */
export function runBinding(job: string, runId: string): Uint8Array {
  return concatBytes(lengthPrefixed(job), lengthPrefixed(runId));
}
