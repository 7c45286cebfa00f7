/** The values that bind a frame to its job and run (see codec-core.ts for the framing). */
import { randomBytes, sha384 } from '@coffer/crypto';
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

/**
 * The 6 random nonce bytes of one writer session (docs/archive-format.md "Sealed frame"). Every
 * session draws its own, a resumed one too: it seals shard numbers again that the crashed session
 * may have stored already, under the same data key. Never all zero, so a salted nonce never equals
 * an unsalted one.
 */
export function sessionSalt(): Uint8Array {
  for (;;) {
    const s = randomBytes(6);
    if (s.some((b) => b !== 0)) return s;
  }
}
