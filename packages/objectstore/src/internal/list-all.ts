import type { ListOptions, ListPage, ObjectInfo } from '../types.ts';

/** Iterates every page of `list` for `prefix`, yielding objects in key order. */
export async function* listAllPages(
  list: (prefix: string, options?: ListOptions) => Promise<ListPage>,
  prefix: string,
): AsyncGenerator<ObjectInfo> {
  let cursor: string | undefined;
  for (;;) {
    const page: ListPage = await list(prefix, cursor === undefined ? {} : { cursor });
    yield* page.objects;
    if (page.cursor === undefined) return;
    cursor = page.cursor;
  }
}
