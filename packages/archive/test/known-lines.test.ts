/**
 * KnownLines (internal/known-lines.ts): a line is found among a base's known lines by comparing
 * it with the next few in the base's order, and through a map of every known line only after a
 * run of misses; whichever way, only an equal line is found, with its own record.
 */
import t from 'tap';
import { KnownLines } from '../src/internal/known-lines.ts';
import type { IndexEntry, KnownRecords } from '../src/types.ts';

function base(n: number, without: string[] = []): KnownRecords {
  const lines = new Map<string, string>();
  const records = new Map<string, IndexEntry>();
  for (let i = 0; i < n; i++) {
    const name = `r${i}`;
    lines.set(name, `{"name":"${name}","v":1}`);
    if (!without.includes(name)) records.set(name, { name, seq: i } as unknown as IndexEntry);
  }
  return { lines, records };
}
const line = (i: number, v = 1) => `{"name":"r${i}","v":${v}}`;

t.test('in the base order: every line found in the window, no map', async (t) => {
  const k = new KnownLines(base(100));
  for (let i = 0; i < 100; i++) {
    const got = k.find(line(i));
    t.equal(got?.entry.name, `r${i}`);
    if (i === 0) t.equal(got?.line, base(1).lines.get('r0'), 'an equal string');
  }
  t.equal(k.mapped, false);
});

t.test('changed, added and removed records: the rest is still found in the window', async (t) => {
  const k = new KnownLines(base(200));
  const found: string[] = [];
  const missed: string[] = [];
  const look = (l: string) => {
    const got = k.find(l);
    if (got === null) missed.push(l);
    else found.push(got.entry.name);
  };
  for (let i = 0; i < 200; i++) {
    if (i % 25 === 0) look('{"name":"new","v":1}'); // added before it
    if (i % 10 === 3)
      look(line(i, 2)); // changed
    else if (i % 10 === 5)
      continue; // removed
    else look(line(i));
  }
  t.equal(found.length, 160);
  t.equal(missed.length, 20 + 8);
  t.notOk(
    found.some((n) => Number(n.slice(1)) % 10 === 3),
    'a changed line is never found',
  );
  t.equal(k.mapped, false, 'no map was needed');
});

t.test('another order: the map is built after a run of misses and finds the rest', async (t) => {
  const k = new KnownLines(base(100));
  let found = 0;
  for (let i = 99; i >= 0; i--) if (k.find(line(i))?.entry.name === `r${i}`) found++;
  t.equal(k.mapped, true);
  t.ok(found >= 100 - 32, `found ${found} of 100`);
  t.equal(k.find(line(5, 9)), null, 'a line no known one equals');
});

t.test('a known line without its record is not found', async (t) => {
  const k = new KnownLines(base(10, ['r3']));
  t.equal(k.find(line(3)), null);
  t.equal(k.find(line(4))?.entry.name, 'r4');
});
