/**
 * The last steps of a run's commit, the same for both formats (docs/archive-format.md: the
 * manifest is the commit point): the sealed run index is stored while the manifest is signed and
 * its signature stored; once both are in the store (and the caller's fence still holds) the
 * manifest is stored create-only, then the recovery files. A failed put of the index or the
 * signature fails the commit with no manifest stored.
 *
 * The index and the signature are stored create-only too: a writer paused past its lease that
 * wakes after its successor committed the run must not replace the committed run's index or
 * signature (its own manifest put would fail, but the committed run would no longer verify).
 * What a create-only put finds in the way is, in order: the writer's own bytes (a put retried after
 * its reply was lost: done), part of a committed run (refused), or the leftover of an attempt that
 * lost the run before its manifest (replaced, once the caller's fence confirms the run is still
 * this writer's).
 */
import { canonicalJsonBytes, type Digest, formatDigest, sha384, sign, toBase64Url } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { layout } from '../layout.ts';
import { writeRecoveryFiles } from '../recovery.ts';
import { MANIFEST_SIGNATURE_CONTEXT, SIGNATURE_FORMAT, type SignatureDocument } from './manifest.ts';
import { holds, isPreconditionFailed } from './put-once.ts';
import type { SealedIndex } from './sealed-lines.ts';
import { deleteObject, headObject, putObject } from './store.ts';

export interface ManifestCommit {
  store: ObjectStore;
  job: string;
  runId: string;
  formatVersion: string;
  /** The run's sealed index (index.bin). */
  index: SealedIndex;
  /** The manifest document's canonical bytes, exactly as signed and stored. */
  manifestBytes: Uint8Array;
  /** The signer's fingerprint (as the manifest names it) and key pair. */
  signer: Digest;
  signerSecretKey: Uint8Array;
  signerPublicKey: Uint8Array;
  /** The caller's fence, checked right before the manifest is stored. */
  beforeCommit?: (() => void | Promise<void>) | undefined;
  writeRecovery: boolean;
}

/** Stores index, signature and manifest (in that dependency order); returns what the summary names. */
export async function commitManifest(
  m: ManifestCommit,
): Promise<{ manifestKey: string; manifestDigest: Digest; sigBytes: Uint8Array }> {
  const { store, job, runId } = m;
  const indexStored = putOnce(m, layout.index(job, runId), m.index.bytes, 'application/octet-stream');
  indexStored.catch(() => undefined);
  const manifestDigest = formatDigest(sha384(m.manifestBytes));
  const sigDoc: SignatureDocument = {
    format: SIGNATURE_FORMAT,
    formatVersion: m.formatVersion,
    context: MANIFEST_SIGNATURE_CONTEXT,
    manifest: manifestDigest,
    signer: m.signer,
    signature: toBase64Url(sign(m.signerSecretKey, m.manifestBytes, MANIFEST_SIGNATURE_CONTEXT)),
  };
  const sigBytes = canonicalJsonBytes(sigDoc);
  const stored = await Promise.allSettled([
    indexStored,
    putOnce(m, layout.signature(job, runId), sigBytes, 'application/json'),
  ]);
  // The index's failure first, as when the two were stored one after the other.
  for (const r of stored) if (r.status === 'rejected') throw r.reason;
  const manifestKey = layout.manifest(job, runId);
  await m.beforeCommit?.();
  // Create-only: of two writers that both reach this point for one run (a paused lease holder
  // and its successor), exactly one commits; the other fails with the store's precondition error.
  await putObject(store, manifestKey, m.manifestBytes, {
    contentLength: m.manifestBytes.length,
    contentType: 'application/json',
    ifNoneMatch: '*',
  });
  if (m.writeRecovery)
    await writeRecoveryFiles(store, { signerPublicKey: m.signerPublicKey, formatVersion: m.formatVersion });
  return { manifestKey, manifestDigest, sigBytes };
}

/** Stores `bytes` at `key` create-only (see the module comment for what may be in the way). */
async function putOnce(
  m: ManifestCommit,
  key: string,
  bytes: Uint8Array,
  contentType: string,
): Promise<void> {
  const put = () =>
    putObject(m.store, key, bytes, { contentLength: bytes.length, contentType, ifNoneMatch: '*' });
  try {
    await put();
    return;
  } catch (e) {
    if (!isPreconditionFailed(e)) throw e;
    if (await holds(m.store, key, bytes.length, (there) => Buffer.from(there).equals(bytes))) return;
    if ((await headObject(m.store, layout.manifest(m.job, m.runId))) !== null) throw e;
    await m.beforeCommit?.();
  }
  await deleteObject(m.store, key);
  await put();
}
