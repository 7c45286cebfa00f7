/**
 * Fetching a run's index.bin and checking it against the signed manifest, for both format
 * versions (docs/archive-format.md "Read algorithm" and §12.7): its size is bounded by the signed
 * size while it downloads and its SHA-384 must equal the signed digest before any frame is
 * opened, so a swapped or padded index is refused before its key is ever used on it.
 */
import { formatDigest, sha384 } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import type { ManifestDocument } from '../types.ts';
import { getObject } from './store.ts';

/**
 * The index bytes of the run the manifest describes. Throws ERR_ARCHIVE_INDEX_MISSING when it is
 * absent, ERR_ARCHIVE_INDEX_TAMPERED when it is larger than signed or its digest differs,
 * ERR_ARCHIVE_DESTINATION for store failures.
 */
export async function readSignedIndex(
  store: ObjectStore,
  doc: Pick<ManifestDocument, 'job' | 'runId' | 'index'>,
): Promise<Uint8Array> {
  const object = layout.index(doc.job, doc.runId);
  const bytes = await getObject(store, object, {
    maxBytes: doc.index.size,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'larger than the signed size' }),
  });
  if (bytes === null) throw new ArchiveError('ERR_ARCHIVE_INDEX_MISSING', { object });
  if (bytes.length !== doc.index.size || formatDigest(sha384(bytes)) !== doc.index.sha384) {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', {
      object,
      detail: 'SHA-384 differs from the signed manifest',
    });
  }
  return bytes;
}
