/**
 * A store that counts reads: the same store underneath (every call goes through to it), with the
 * number of `get` and `getStream` calls per key, so a test can say which objects a reader fetched.
 */
export interface ReadCounts<S> {
  /** The counting view of the store; use it where the code under test takes a store. */
  store: S;
  /** Reads of exactly `key`. */
  reads(key: string): number;
  /** Reads of every key `match` accepts, summed. */
  count(match: (key: string) => boolean): number;
}

export function countReads<S extends object>(store: S): ReadCounts<S> {
  const n = new Map<string, number>();
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if ((prop === 'get' || prop === 'getStream') && typeof v === 'function')
        return (key: string, ...rest: unknown[]) => {
          n.set(key, (n.get(key) ?? 0) + 1);
          return (v as (...a: unknown[]) => unknown).call(target, key, ...rest);
        };
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return {
    store: wrapped,
    reads: (key) => n.get(key) ?? 0,
    count: (match) => [...n].reduce((s, [k, c]) => s + (match(k) ? c : 0), 0),
  };
}
