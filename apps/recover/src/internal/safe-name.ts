/**
 * Maps an archive record name (any string: a file path, an S3 key, a Redis key) to path segments
 * under the extraction directory that cannot leave it, on any operating system.
 *
 * The encoding (normative for `extract`; README.md "Extraction paths" repeats it):
 *   1. The name is split on "/" into segments (N slashes give N+1 segments, some maybe empty).
 *   2. In each segment these characters are percent-encoded as the %XX of their UTF-8 bytes
 *      (upper-case hex; a lone surrogate as its 3-byte WTF-8 form):
 *      "%" itself; "\"; the Windows-reserved < > : " | ? *; control characters (C0, DEL, C1);
 *      Unicode format characters (bidi overrides and isolates such as U+202E, zero-width
 *      characters, U+FEFF), line/paragraph separators, private-use, unassigned code points and
 *      lone surrogates; characters whose NFKC form contains one of / \ . : % or a control
 *      (fullwidth solidus U+FF0F, fullwidth full stop U+FF0E, one-dot leader U+2024 ...); and
 *      separator lookalikes that NFKC leaves alone (U+2044, U+2215, U+2216, U+2571, U+2572, U+29F5,
 *      U+29F8, U+29F9, U+1735).
 *   3. Whole-segment rules: an empty segment becomes "%"; "." becomes "%2E" and ".." "%2E%2E"; a
 *      trailing "." or " " is encoded (Windows drops them); a Windows device name (CON, PRN, AUX,
 *      NUL, COM0-9, LPT0-9, alone or before a "."; any case) gets its first character encoded.
 *   4. A segment longer than 255 UTF-8 bytes after encoding keeps its first at most 200 bytes (never
 *      splitting a character or an escape) followed by "%%" and the first 32 hex digits of the
 *      SHA-384 of the original segment's bytes (at most 234 bytes in all).
 * Percent-decoding a segment gives back the original (except "%" = empty and shortened segments),
 * so two different names never map to one path, and an encoded segment never contains a separator,
 * is never "." or "..", and is never empty: joined under DIR it cannot leave DIR.
 */
import { createHash } from 'node:crypto';

/** Characters that NFKC leaves alone but that render like a path separator. */
const LOOKALIKES = new Set([0x1735, 0x2044, 0x2215, 0x2216, 0x2571, 0x2572, 0x29f5, 0x29f8, 0x29f9]);
const ASCII_ESCAPED = new Set(['%', '\\', '<', '>', ':', '"', '|', '?', '*', '/']);
const UNSAFE_CATEGORY = /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}]$/u;
const NFKC_DANGER = /[/\\.:%\p{Cc}]/u;
const DEVICE = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)/i;
const MAX_SEGMENT_BYTES = 255;
const KEEP_BYTES = 200;

function escapeChar(ch: string): string {
  const cp = ch.codePointAt(0)!;
  if (cp >= 0xd800 && cp <= 0xdfff) {
    // Lone surrogate: WTF-8 bytes, so the mapping stays one-to-one.
    return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)].map(hex).join('');
  }
  return [...Buffer.from(ch, 'utf8')].map(hex).join('');
}

function hex(b: number): string {
  return `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
}

function needsEscape(ch: string): boolean {
  const cp = ch.codePointAt(0)!;
  if (cp < 0x80) return cp < 0x20 || cp === 0x7f || ASCII_ESCAPED.has(ch);
  if (UNSAFE_CATEGORY.test(ch)) return true;
  if (LOOKALIKES.has(cp)) return true;
  const nfkc = ch.normalize('NFKC');
  return nfkc !== ch && NFKC_DANGER.test(nfkc);
}

/** Encodes one segment (no "/" inside) by steps 2-4 of the module comment. */
export function encodeSegment(segment: string): string {
  if (segment === '') return '%';
  if (segment === '.') return '%2E';
  if (segment === '..') return '%2E%2E';
  // Iterating a string yields code points; a lone surrogate comes out as its own one-unit string.
  const parts: string[] = [];
  for (const ch of segment) parts.push(needsEscape(ch) ? escapeChar(ch) : ch);
  const last = parts.length - 1;
  if (parts[last] === '.' || parts[last] === ' ') parts[last] = escapeChar(parts[last]!);
  if (DEVICE.test(segment)) parts[0] = escapeChar(parts[0]!);
  const encoded = parts.join('');
  if (Buffer.byteLength(encoded, 'utf8') <= MAX_SEGMENT_BYTES) return encoded;
  // Shorten at a part boundary, so neither a character nor an escape is split.
  let kept = '';
  let bytes = 0;
  for (const p of parts) {
    const n = Buffer.byteLength(p, 'utf8');
    if (bytes + n > KEEP_BYTES) break;
    kept += p;
    bytes += n;
  }
  const digest = createHash('sha384').update(wtf8(segment)).digest('hex').slice(0, 32);
  return `${kept}%%${digest}`;
}

/** UTF-8 bytes of `s`, with lone surrogates as their WTF-8 form (distinct names, distinct bytes). */
function wtf8(s: string): Buffer {
  const out: Buffer[] = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    out.push(
      cp >= 0xd800 && cp <= 0xdfff
        ? Buffer.from([0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)])
        : Buffer.from(ch, 'utf8'),
    );
  }
  return Buffer.concat(out);
}

/**
 * The path segments (relative to the extraction directory) that record `name` is written to.
 * Returns at least one segment; every segment is non-empty, not "." or "..", and free of
 * separators, so joining them under DIR stays under DIR. Never throws.
 */
export function recordPath(name: string): string[] {
  return name.split('/').map(encodeSegment);
}

/** The relative path of `name` with "/" separators (for messages and --json output). */
export function recordPathText(name: string): string {
  return recordPath(name).join('/');
}
