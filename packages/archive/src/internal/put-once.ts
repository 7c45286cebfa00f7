/**
 * What a create-only put of a run's own object (shard, index, signature) found in the way. Those
 * puts are create-only so that a writer paused past its lease, waking after its successor took
 * the run over, cannot replace what the successor stored (docs/archive-format.md §8, "Write
 * (seal)", step 8). The object in the way may still be the writer's own: an S3 client retries a
 * put whose reply was lost, and the retry is refused by the first attempt's object.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { getObject } from './store.ts';

/** The store refused a create-only put: the key exists. */
export const isPreconditionFailed = (e: unknown): boolean =>
  (e as { storeErrorCode?: unknown } | null)?.storeErrorCode === 'ERR_OBJECTSTORE_PRECONDITION_FAILED';

/**
 * Whether the object at `key` is `size` bytes that `same` accepts (read with `size` as its bound:
 * anything larger is not what the writer stored).
 */
export async function holds(
  store: ObjectStore,
  key: string,
  size: number,
  same: (there: Uint8Array) => boolean,
): Promise<boolean> {
  const larger = new ArchiveError('ERR_ARCHIVE_DESTINATION', { object: key, detail: 'larger' });
  const there = await getObject(store, key, { maxBytes: size, tooLarge: () => larger }).catch(
    (x: unknown) => {
      if (x === larger) return null;
      throw x;
    },
  );
  return there !== null && there.length === size && same(there);
}
