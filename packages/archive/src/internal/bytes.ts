/** Small byte helpers for the binary framings of format 0.1 (big-endian integers, length prefixes). */

const encoder = new TextEncoder();

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

export function utf8Decode(b: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: true }).decode(b);
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** lp(s) = u16 BE byte length || UTF-8 bytes: an unambiguous encoding of a string in associated data. */
export function lengthPrefixed(s: string): Uint8Array {
  const b = utf8(s);
  if (b.length > 0xffff) throw new RangeError('string too long for a u16 length prefix');
  const out = new Uint8Array(2 + b.length);
  out[0] = b.length >>> 8;
  out[1] = b.length & 0xff;
  out.set(b, 2);
  return out;
}

export function writeU32(buf: Uint8Array, offset: number, value: number): void {
  new DataView(buf.buffer, buf.byteOffset, buf.byteLength).setUint32(offset, value, false);
}

export function readU32(buf: Uint8Array, offset: number): number {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(offset, false);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}
