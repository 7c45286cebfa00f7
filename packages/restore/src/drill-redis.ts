/**
 * The redis drill's second look at a key whose DUMP after the restore differs from the archived
 * one. A DUMP payload is not canonical: a set or hash kept as a hash table serialises in the
 * table's iteration order, which a RESTORE does not reproduce (Redis 7.0 answers a different DUMP
 * for the same three-member set). So when the bytes differ, the archived payload is restored into
 * a temporary key next to the drill's scratch keys (same server, fresh random name, deleted
 * afterwards) and both keys' values are compared in canonical form: type, then the elements read
 * with byte-exact (Buffer) replies, unordered collections sorted. Only bytes that verified
 * against the archive reach this function; nothing is logged.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A canonical, comparable form of a key's value, or null for a type without one (modules). */
async function canonical(client: Redis, key: Buffer): Promise<string | null> {
  const type = await client.type(key);
  const hex = (b: Buffer) => b.toString('hex');
  const sorted = (xs: Buffer[]) => xs.map(hex).sort();
  switch (type) {
    case 'string':
      return JSON.stringify([type, hex((await client.getBuffer(key)) ?? Buffer.alloc(0))]);
    case 'list':
      return JSON.stringify([type, (await client.lrangeBuffer(key, 0, -1)).map(hex)]);
    case 'set':
      return JSON.stringify([type, sorted(await client.smembersBuffer(key))]);
    case 'hash': {
      const flat = await client.hgetallBuffer(key);
      return JSON.stringify([
        type,
        Object.entries(flat)
          .map(([f, v]) => [f, hex(v)])
          .sort(),
      ]);
    }
    case 'zset': // ordered by score, then bytes: canonical as read
      return JSON.stringify([type, (await client.zrangeBuffer(key, '0', '-1', 'WITHSCORES')).map(hex)]);
    case 'stream': // ordered by entry id
      return JSON.stringify([
        type,
        (await client.xrangeBuffer(key, '-', '+')).map(([id, fields]) => [hex(id), fields.map(hex)]),
      ]);
    default:
      return null;
  }
}

/**
 * Whether the restored `key` holds the same value as the archived DUMP `payload`. Uses a temporary
 * key `<tmpPrefix><random>` (removed before returning). False for a value type without a canonical
 * form, or when the payload cannot be restored.
 */
export async function redisValueMatches(
  client: Redis,
  key: Buffer,
  payload: Uint8Array,
  tmpPrefix: string,
): Promise<boolean> {
  const tmp = Buffer.from(`${tmpPrefix}${randomBytes(8).toString('hex')}`);
  try {
    await client.restore(tmp, 0, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength));
    const [a, b] = [await canonical(client, key), await canonical(client, tmp)];
    return a !== null && a === b;
  } catch {
    return false;
  } finally {
    await client.unlink(tmp).catch(() => 0);
  }
}
