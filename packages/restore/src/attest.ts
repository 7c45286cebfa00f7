/**
 * Keyless attestation of a run (`POST /admin/restore/attest`): what a bucket reader with no secret
 * key can prove. docs/restore.md "Attestation" is normative.
 *
 * 1. Signature: format version, the hybrid signature (optionally pinned to the engine's signer),
 *    the manifest's location (`readRunManifest`).
 * 2. Completeness: every shard the manifest lists exists with its signed size, no unlisted object
 *    sits among the shards, the record index exists with its signed size.
 * 3. Anti-rollback: the prevRunId chain back from the run (each predecessor signed by the same
 *    signer, same job, sealed no later than its successor started, no cycle; a pruned predecessor
 *    ends the walk), and the run chain's newest head compared with the newest run the engine
 *    recorded (`expectedLatest`): a destination whose newest run is older has been rolled back.
 *
 * Security-relevant behaviour: no key is used and no record data is read (only manifests,
 * signatures, listings and object sizes), so an attestation can run with the break-glass key
 * offline and the operational key absent.
 */
import {
  isArchiveError,
  isChunkedManifest,
  layout,
  readRunManifest,
  type VerifiedManifest,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';

export interface AttestOptions {
  runId: string;
  job?: string;
  /** Trusted signer public key (the engine's own); without it the run's own signer is used for the chain. */
  signerPublicKey?: Uint8Array;
  /** The newest successful run the engine recorded for the job (anti-rollback), when known. */
  expectedLatest?: { runId: string; sealedAt?: string };
  /** Most predecessors walked (default 1000). */
  maxChain?: number;
  now?: () => Date;
}

export interface Attestation {
  kind: 'coffer-run-attestation';
  v: 1;
  ok: boolean;
  runId: string;
  job: string | null;
  attestedAt: string;
  signature: { ok: boolean; signer: string | null; pinned: boolean; code?: string; reason?: string };
  completeness: {
    ok: boolean;
    shards: number;
    missing: number[];
    sizeMismatch: number[];
    unexpected: number;
    index: boolean;
  };
  chain: {
    ok: boolean;
    /** Predecessors verified. */
    length: number;
    /** `complete`: reached the first run; `pruned`: a predecessor is gone; `broken`: a check failed; `capped`. */
    end: 'complete' | 'pruned' | 'broken' | 'capped';
    reason?: string;
  };
  rollback: {
    ok: boolean;
    /** Whether no other run of the job names this run as its predecessor. */
    isHead: boolean;
    /** Newest run id of the job found in the destination (by sealedAt). */
    newestRunId: string | null;
    reason?: string;
  };
  failures: string[];
}

async function manifestOf(
  store: ObjectStore,
  job: string,
  runId: string,
  pin: Uint8Array | undefined,
  signer: string,
) {
  const m = await readRunManifest(store, {
    job,
    runId,
    ...(pin ? { signerPublicKey: pin } : { pinSigner: signer }),
  });
  return m;
}

/**
 * Attests a run without any key. Never throws for an archive or store fault: the verdict says
 * which check failed (`ok: false`, `failures`).
 */
export async function attestRun(store: ObjectStore, options: AttestOptions): Promise<Attestation> {
  const now = options.now ?? (() => new Date());
  const out: Attestation = {
    kind: 'coffer-run-attestation',
    v: 1,
    ok: false,
    runId: options.runId,
    job: options.job ?? null,
    attestedAt: now().toISOString(),
    signature: { ok: false, signer: null, pinned: false },
    completeness: { ok: false, shards: 0, missing: [], sizeMismatch: [], unexpected: 0, index: false },
    chain: { ok: false, length: 0, end: 'broken' },
    rollback: { ok: false, isHead: false, newestRunId: null },
    failures: [],
  };
  let m: VerifiedManifest;
  try {
    m = await readRunManifest(store, {
      runId: options.runId,
      ...(options.job === undefined ? {} : { job: options.job }),
      ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
    });
  } catch (e) {
    out.signature.code = isArchiveError(e) ? e.code : 'ERR_UNKNOWN';
    out.signature.reason = isArchiveError(e) ? e.reason : 'manifest unreadable';
    out.failures.push(`signature: ${out.signature.reason}`);
    return out;
  }
  const doc = m.document;
  out.job = doc.job;
  out.signature = { ok: true, signer: m.signer, pinned: m.signerPinned };

  // Completeness: sizes and presence only (no object body is read).
  try {
    const present = new Map<string, number>();
    for await (const o of store.listAll(layout.shardsPrefix(doc.job, doc.runId))) present.set(o.key, o.size);
    // A 0.2 run owns no shards: its chunks live in the job's packs, which only a key holder can
    // enumerate (the sealed index names them), so completeness without a key is the index.
    const shards = isChunkedManifest(doc) ? [] : doc.shards;
    out.completeness.shards = shards.length;
    shards.forEach((s, i) => {
      const size = present.get(layout.shard(doc.job, doc.runId, i));
      if (size === undefined) out.completeness.missing.push(i);
      else if (size !== s.size) out.completeness.sizeMismatch.push(i);
      present.delete(layout.shard(doc.job, doc.runId, i));
    });
    out.completeness.unexpected = present.size;
    const index = await store.head(layout.index(doc.job, doc.runId));
    out.completeness.index = index !== null && index.size === doc.index.size;
    out.completeness.ok =
      out.completeness.missing.length === 0 &&
      out.completeness.sizeMismatch.length === 0 &&
      out.completeness.unexpected === 0 &&
      out.completeness.index;
    if (!out.completeness.ok)
      out.failures.push('completeness: the shard list or index does not match the signed manifest');
  } catch {
    out.failures.push('completeness: the destination could not be listed');
  }

  // Chain: walk prevRunId back.
  const pin = options.signerPublicKey;
  const seen = new Set([doc.runId]);
  let cur = doc;
  const max = options.maxChain ?? 1000;
  for (;;) {
    const prev = cur.prevRunId;
    if (prev === null) {
      out.chain.end = 'complete';
      break;
    }
    if (seen.has(prev)) {
      out.chain.end = 'broken';
      out.chain.reason = 'the run chain loops';
      break;
    }
    if (out.chain.length >= max) {
      out.chain.end = 'capped';
      break;
    }
    let pm: VerifiedManifest;
    try {
      pm = await manifestOf(store, doc.job, prev, pin, m.signer);
    } catch (e) {
      if (isArchiveError(e, 'ERR_ARCHIVE_NOT_FOUND')) {
        out.chain.end = 'pruned';
      } else {
        out.chain.end = 'broken';
        out.chain.reason = `predecessor ${prev}: ${isArchiveError(e) ? e.reason : 'unreadable'}`;
      }
      break;
    }
    if (Date.parse(pm.document.sealedAt) > Date.parse(cur.startedAt)) {
      out.chain.end = 'broken';
      out.chain.reason = `predecessor ${prev} was sealed after its successor started`;
      break;
    }
    seen.add(prev);
    out.chain.length++;
    cur = pm.document;
  }
  out.chain.ok = out.chain.end !== 'broken';
  if (!out.chain.ok) out.failures.push(`chain: ${out.chain.reason}`);

  // Rollback: successors of this run, the newest run of the job, the engine's record.
  try {
    const manifests: VerifiedManifest[] = [];
    const prefix = `jobs/${doc.job}/runs/`;
    const ids = new Set<string>();
    for await (const o of store.listAll(prefix)) {
      const mm = /^jobs\/[^/]+\/runs\/([^/]+)\/manifest\.json$/.exec(o.key);
      if (mm) ids.add(mm[1]!);
    }
    for (const id of ids) {
      try {
        manifests.push(id === doc.runId ? m : await manifestOf(store, doc.job, id, pin, m.signer));
      } catch {
        // A run that does not verify is no evidence either way.
      }
    }
    out.rollback.isHead = !manifests.some((x) => x.document.prevRunId === doc.runId);
    const newest = manifests.reduce<VerifiedManifest | null>(
      (best, x) => (best === null || x.document.sealedAt > best.document.sealedAt ? x : best),
      null,
    );
    out.rollback.newestRunId = newest?.document.runId ?? null;
    out.rollback.ok = true;
    const expected = options.expectedLatest;
    if (expected !== undefined) {
      const found = manifests.find((x) => x.document.runId === expected.runId);
      if (found === undefined) {
        out.rollback.ok = false;
        out.rollback.reason = `the newest run the engine recorded (${expected.runId}) is missing from the destination`;
      } else if (newest !== null && newest.document.sealedAt < found.document.sealedAt) {
        out.rollback.ok = false;
        out.rollback.reason = 'the destination holds no run as new as the engine recorded';
      }
    }
    if (!out.rollback.ok) out.failures.push(`rollback: ${out.rollback.reason}`);
  } catch {
    out.failures.push('rollback: the destination could not be listed');
  }
  out.ok =
    out.signature.ok && out.completeness.ok && out.chain.ok && out.rollback.ok && out.failures.length === 0;
  return out;
}
