/**
 * The keys of a 0.2 job, all derived from its chunk key K (docs/archive-format.md §12.2): the key
 * id that names K in object paths, the chunk-id key (keyed chunk ids, so the bucket never holds a
 * plain hash of known content), and one key per pack, per pack index and per run index, so every
 * sealed object has a key of its own and no (key, nonce) pair can repeat across a job's lifetime.
 */
import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import { ArchiveError } from '../errors.ts';

export interface ChunkKeys {
  /** 32 lower-case hex digits. */
  readonly keyId: string;
  /** HMAC-SHA-256 key of chunk ids (a KeyObject: converting a raw key on every call costs more than a small chunk's MAC). */
  readonly idKey: KeyObject;
  readonly chunkKey: Uint8Array;
}

function hkdf(ikm: Uint8Array, salt: Uint8Array, info: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', ikm, salt, Buffer.from(info, 'latin1'), 32));
}

export function chunkKeys(k: Uint8Array): ChunkKeys {
  if (!(k instanceof Uint8Array) || k.length !== 32) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'chunk key must be 32 bytes' });
  }
  const keyId = createHmac('sha256', k)
    .update('coffer/archive/v0.2/key-id', 'latin1')
    .digest('hex')
    .slice(0, 32);
  const idKey = createSecretKey(hkdf(k, new Uint8Array(0), 'coffer/archive/v0.2/chunk-id'));
  return { keyId, idKey, chunkKey: k };
}

/** A chunk's id: HMAC-SHA-256(chunk-id key, plaintext), 64 lower-case hex digits. */
export function chunkId(keys: ChunkKeys, bytes: Uint8Array): string {
  return createHmac('sha256', keys.idKey).update(bytes).digest('hex');
}

const HEX32 = /^[0-9a-f]{32}$/;

function idBytes(id: string): Buffer {
  if (!HEX32.test(id))
    throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'object id is not 32 hex digits' });
  return Buffer.from(id, 'hex');
}

export function packKey(keys: ChunkKeys, packId: string): Uint8Array {
  return hkdf(keys.chunkKey, idBytes(packId), 'coffer/archive/v0.2/pack');
}

export function packIndexKey(keys: ChunkKeys, indexId: string): Uint8Array {
  return hkdf(keys.chunkKey, idBytes(indexId), 'coffer/archive/v0.2/pack-index');
}

export function runIndexKey(keys: ChunkKeys, runId: string): Uint8Array {
  return hkdf(keys.chunkKey, Buffer.from(runId, 'utf8'), 'coffer/archive/v0.2/run-index');
}

/** A fresh pack or pack-index id: 16 random bytes as 32 hex digits. */
export function newObjectId(): string {
  return Buffer.from(globalThis.crypto.getRandomValues(new Uint8Array(16))).toString('hex');
}

export function isObjectId(id: string): boolean {
  return HEX32.test(id);
}
