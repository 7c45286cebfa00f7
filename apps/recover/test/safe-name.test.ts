// The extraction-path encoding: every hostile record name maps to segments that stay under DIR,
// and the mapping is one-to-one (percent-decoding gives the name back).
import { resolve, sep } from 'node:path';
import t, { type Test } from 'tap';
import { encodeSegment, recordPath } from '../src/internal/safe-name.ts';

const ROOT = resolve('/tmp/coffer-extract-root');

/** ASCII-only rendering of a name for assertion messages (TAP output must stay one line). */
const show = (s: string): string =>
  JSON.stringify(s)
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .slice(0, 80);

/** Percent-decodes one encoded segment (WTF-8 aware); "%" is the empty segment. */
function decodeSegment(seg: string): string {
  if (seg === '%') return '';
  const bytes: number[] = [];
  for (let i = 0; i < seg.length; ) {
    if (seg[i] === '%') {
      bytes.push(Number.parseInt(seg.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      const cp = seg.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      bytes.push(...Buffer.from(ch, 'utf8'));
      i += ch.length;
    }
  }
  // WTF-8 decode: like UTF-8, but 3-byte surrogate forms come back as lone surrogates.
  let out = '';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    if (b < 0x80) {
      out += String.fromCharCode(b);
      i++;
    } else if (b >= 0xf0) {
      const cp =
        ((b & 0x07) << 18) |
        ((bytes[i + 1]! & 0x3f) << 12) |
        ((bytes[i + 2]! & 0x3f) << 6) |
        (bytes[i + 3]! & 0x3f);
      out += String.fromCodePoint(cp);
      i += 4;
    } else if (b >= 0xe0) {
      const cp = ((b & 0x0f) << 12) | ((bytes[i + 1]! & 0x3f) << 6) | (bytes[i + 2]! & 0x3f);
      out += String.fromCharCode(cp);
      i += 3;
    } else {
      out += String.fromCharCode(((b & 0x1f) << 6) | (bytes[i + 1]! & 0x3f));
      i += 2;
    }
  }
  return out;
}

function assertContained(tt: Test, name: string): string[] {
  const segs = recordPath(name);
  tt.ok(segs.length >= 1, 'at least one segment');
  for (const s of segs) {
    tt.not(s, '', 'no empty segment');
    tt.not(s, '.', 'no "." segment');
    tt.not(s, '..', 'no ".." segment');
    tt.notMatch(s, /[/\\\0]/, 'no separator or NUL inside a segment');
    tt.ok(Buffer.byteLength(s, 'utf8') <= 255, 'segment fits NAME_MAX');
  }
  const full = resolve(ROOT, ...segs);
  tt.ok(full.startsWith(ROOT + sep), `${show(name)} stays under the root`);
  return segs;
}

const cases: [string, string, string[]][] = [
  ['plain path', 'dir/sub/file.txt', ['dir', 'sub', 'file.txt']],
  ['dot-dot traversal', '../../etc/passwd', ['%2E%2E', '%2E%2E', 'etc', 'passwd']],
  ['dot segments in the middle', 'a/./b/../c', ['a', '%2E', 'b', '%2E%2E', 'c']],
  ['absolute path', '/etc/passwd', ['%', 'etc', 'passwd']],
  ['double slash and trailing slash', 'a//b/', ['a', '%', 'b', '%']],
  ['empty name', '', ['%']],
  ['NUL byte', 'a\u0000b', ['a%00b']],
  ['newline and escape', 'x\ny\u001b[31m', ['x%0Ay%1B[31m']],
  ['backslash traversal', '..\\..\\windows\\win.ini', ['..%5C..%5Cwindows%5Cwin.ini']],
  ['drive letter', 'C:\\Windows\\evil.dll', ['C%3A%5CWindows%5Cevil.dll']],
  ['drive-relative', 'C:', ['C%3A']],
  ['UNC prefix', '\\\\server\\share', ['%5C%5Cserver%5Cshare']],
  ['RTL override', 'invoice\u202Etxt.exe', ['invoice%E2%80%AEtxt.exe']],
  ['zero-width space', 'a\u200Bb', ['a%E2%80%8Bb']],
  ['BOM', '\uFEFFname', ['%EF%BB%BFname']],
  ['fullwidth solidus', 'a\uFF0Fb', ['a%EF%BC%8Fb']],
  ['fullwidth dot-dot', '\uFF0E\uFF0E', ['%EF%BC%8E%EF%BC%8E']],
  ['division slash', '..\u2215..\u2215etc', ['..%E2%88%95..%E2%88%95etc']],
  ['fraction slash', 'a\u2044b', ['a%E2%81%84b']],
  ['fullwidth reverse solidus', 'a\uFF3Cb', ['a%EF%BC%BCb']],
  ['percent sign', '100%', ['100%25']],
  ['already encoded lookalike', '%2E%2E', ['%252E%252E']],
  ['windows reserved', 'a<b>c:d"e|f?g*h', ['a%3Cb%3Ec%3Ad%22e%7Cf%3Fg%2Ah']],
  ['trailing dot and space', 'a./b ', ['a%2E', 'b%20']],
  ['device name', 'CON', ['%43ON']],
  ['device name with extension', 'nul.txt', ['%6Eul.txt']],
  ['device-like but longer', 'console.log', ['console.log']],
  ['lone surrogate', 'x\uD800y', ['x%ED%A0%80y']],
  ['line separator', 'a\u2028b', ['a%E2%80%A8b']],
  ['ordinary unicode kept', 'café/日本語 ファイル.txt', ['café', '日本語 ファイル.txt']],
  ['emoji kept', 'photos/🐈.jpg', ['photos', '🐈.jpg']],
  ['redis-style key', 'user:42:profile', ['user%3A42%3Aprofile']],
];

t.test('documented encodings', async (tt) => {
  for (const [what, name, want] of cases) {
    const segs = assertContained(tt, name);
    tt.same(segs, want, what);
    tt.equal(segs.map(decodeSegment).join('/'), name, `${what}: decodes back`);
  }
});

t.test('very long components are shortened with a hash, still distinct', async (tt) => {
  const a = `${'x'.repeat(300)}a`;
  const b = `${'x'.repeat(300)}b`;
  const sa = assertContained(tt, a);
  const sb = assertContained(tt, b);
  tt.equal(sa.length, 1);
  tt.match(sa[0]!, /^x{200}%%[0-9a-f]{32}$/, 'prefix, %% marker, 32 hex digits');
  tt.not(sa[0], sb[0], 'different long names give different paths');
  // Multi-byte characters and escapes are never split by the shortening.
  const wide = '日'.repeat(100);
  const sw = encodeSegment(wide);
  tt.ok(Buffer.byteLength(sw, 'utf8') <= 234);
  tt.match(sw, /^(日)+%%[0-9a-f]{32}$/);
  const esc = encodeSegment('\u0001'.repeat(100));
  tt.match(esc, /^(%01)+%%[0-9a-f]{32}$/, 'escapes are kept whole');
  const long = assertContained(tt, `${'a/'.repeat(50)}${'z'.repeat(1000)}`);
  tt.equal(long.length, 51);
});

t.test('random hostile names: contained and one-to-one', async (tt) => {
  const pool = [
    'a',
    'Z',
    '.',
    '..',
    '/',
    '\\',
    ':',
    '%',
    '\u0000',
    ' ',
    '\u202E',
    '\uFF0F',
    '\uFF0E',
    '\u2215',
    'é',
    '日',
    '🐈',
    '\uD800',
    '\uDC00',
    'C',
    'O',
    'N',
    '\n',
    '*',
  ];
  let seed = 12345;
  const rnd = (n: number): number => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  const seen = new Map<string, string>();
  let collisions = 0;
  for (let i = 0; i < 3000; i++) {
    let name = '';
    const len = rnd(12);
    for (let j = 0; j < len; j++) name += pool[rnd(pool.length)];
    const segs = recordPath(name);
    for (const s of segs) {
      if (s === '' || s === '.' || s === '..' || /[/\\\0]/.test(s))
        tt.fail(`unsafe segment for ${show(name)}`);
    }
    if (!resolve(ROOT, ...segs).startsWith(ROOT + sep)) tt.fail(`escapes: ${show(name)}`);
    const key = segs.join('/');
    const prev = seen.get(key);
    if (prev !== undefined && prev !== name) collisions++;
    seen.set(key, name);
    if (segs.map(decodeSegment).join('/') !== name) tt.fail(`does not decode back: ${show(name)}`);
  }
  tt.equal(collisions, 0, 'no two names share a path');
});
