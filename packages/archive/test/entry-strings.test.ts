/**
 * Entries parsed from a 0.2 run index hold their strings as slices of the signed line rather than
 * JSON.parse's copies (src/internal/chunked-index.ts toChunkedEntry), and are the same entries
 * either way: names with escapes or characters outside ASCII, several sources, metadata strings.
 */
import { getHeapSnapshot } from 'node:v8';
import type { ObjectStore } from '@coffer/objectstore';
import t from 'tap';
import { type IndexEntry, loadChunkedBase, openRun, type RecordInput } from '../src/index.ts';
import { toChunkedEntry } from '../src/internal/chunked-index.ts';
import { JOB, writeRun } from './chain-helpers.ts';
import { fsStore, type Keys, keys, pseudoRandom, text } from './helpers.ts';

// Strings the heap test looks for are built at run time: a literal of the same characters in this
// module's code would be a string of its own.
const path = (...parts: string[]) => parts.join('/');
/** A function, not a constant: a module constant would keep the strings alive on its own. */
const names = () => [
  path('logs', '2026', '11', 'access-0001.log'),
  'logs/2026/11/a "quoted" name\\with a backslash.txt',
  'données/résumé-été-日本語-📦.txt',
  'tabs\tand\nnewlines in a long enough name',
  'short',
];
/** The first source's namespace: built at run time, so that no literal of it is in the heap. */
const NAMESPACE = ['', 'srv', 'exports', 'a-namespace-long-enough-to-count'].join('/');

function records(): RecordInput[] {
  const out: RecordInput[] = names().map((name, i) => ({
    name,
    body: text(3000 + i * 17, i + 1),
    change: `${1000 + i}:${3000 + i * 17}:1795803737420.1133:1795865779231.5466`,
    metadata: { mode: 420, mtimeMs: 1795803737420.1133 + i, etag: `"etag-${i}-0123456789abcdef"` },
    namespace: NAMESPACE,
  }));
  // A second source: binding and namespace change between records.
  out.push({
    name: path('other-source', 'records', '0001.bin'),
    body: pseudoRandom(200 * 1024, 3),
    change: ['other', 'change', 'token', '0001'].join('-'),
    binding: 'db-primary',
    namespace: 'schema/public',
  });
  out.push({
    name: path('logs', '2026', '11', 'access-0002.log'),
    body: text(5000, 9),
    change: ['a', 'change', 'token', 'for', 'access', '0002'].join('-'),
    namespace: NAMESPACE,
  });
  return out;
}

async function base(store: ObjectStore, k: Keys) {
  await writeRun(store, k, 'run-0001', null, records());
  return (await loadChunkedBase(store, { job: JOB, runId: 'run-0001', secretKey: k.operational.secretKey }))!;
}

t.test('entries parsed from the lines are the entries JSON.parse makes', async (t) => {
  const { store } = fsStore(t);
  const b = await base(store, keys());
  t.equal(b.records.size, names().length + 2);
  let prev = null;
  for (const [name, line] of b.lines) {
    const entry = b.records.get(name)!;
    const plain = toChunkedEntry(JSON.parse(line), entry.seq, 'index');
    t.same(entry, plain, `${JSON.stringify(name)}: the same entry`);
    t.same(toChunkedEntry(JSON.parse(line), entry.seq, 'index', { line, prev }), plain, 'and again, sliced');
    prev = entry;
  }
  const got = [...b.records.values()].map((e) => e.name);
  t.same(
    got.sort(),
    records()
      .map((r) => r.name)
      .sort(),
    'every name as written',
  );
});

/**
 * Calls `visit` with the node type and text of every string in a heap snapshot taken now (after
 * a full collection). Nothing of the snapshot outlives the call, so a later snapshot sees none of it.
 */
async function eachHeapString(visit: (type: string, name: string) => void): Promise<void> {
  let json = '';
  for await (const chunk of getHeapSnapshot()) json += chunk;
  const snap = JSON.parse(json) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + iType]!]!;
    if (type.includes('string')) visit(type, snap.strings[snap.nodes[i + iName]!]!);
  }
}

/** A chunk reference as a record line (`id:length`) or a pack index line (`id:offset:length`) holds it. */
const REFERENCE = /^[0-9a-f]{64}:\d+(:\d+)?$/;

/**
 * In the heap: the flat (copied) strings whose characters are one of `wanted` or a chunk reference
 * to one of `ids`, the sliced strings, the flat strings equal to `counted`, and the flat strings
 * equal to one of `ids`. The references are matched by form, so the test holds none of its own.
 */
async function flatCopies(
  wanted: Set<string>,
  counted: string,
  ids: Set<string>,
): Promise<{ flat: number; sliced: number; copies: number; idCopies: number }> {
  let flat = 0;
  let sliced = 0;
  let copies = 0;
  let idCopies = 0;
  await eachHeapString((type, name) => {
    if (type === 'sliced string') sliced++;
    else if (type === 'string') {
      if (wanted.has(name) || (REFERENCE.test(name) && ids.has(name.slice(0, 64)))) flat++;
      if (name === counted) copies++;
      if (ids.has(name)) idCopies++;
    }
  });
  return { flat, sliced, copies, idCopies };
}

t.test('a loaded base holds no copy of a digest, chunk reference, change token or plain name', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  // Written in a function of its own so that nothing of the writer's outlives it.
  const b = await base(store, k);
  const wanted = new Set<string>();
  const ids = new Set<string>();
  for (const e of b.records.values()) {
    wanted.add(e.sha384);
    if (e.change !== undefined) wanted.add(e.change);
    // A name the line holds only escaped, or too short to slice, stays a copy.
    if (/^[ -~]{13,}$/.test(e.name) && !/["\\]/.test(e.name)) wanted.add(e.name);
  }
  // The chunk map's ids: each once, of its own. No reference (`id:length` as JSON.parse copies it
  // out of a record line, `id:offset:length` out of a pack index line) may stay alive: a slice of
  // one kept it so.
  for (const line of b.map.packs.values()) for (const c of line.chunks) ids.add(c.id);
  const refs = [...b.records.values()].flatMap((e) => e.chunks!.map((c) => c.id));
  t.ok(refs.length > 0 && refs.every((id) => ids.has(id)), 'every record chunk is in the map');
  t.ok(
    wanted.size >= 2 * b.records.size,
    `${wanted.size} strings looked for, and references to ${ids.size} chunks`,
  );
  t.equal(ids.size, b.chunkCount, 'every chunk of the map');
  const { flat, sliced, copies, idCopies } = await flatCopies(wanted, NAMESPACE, ids);
  t.equal(flat, 0, 'none of them is a string of its own');
  t.ok(sliced >= b.records.size * 3, 'the entries’ strings are slices of the lines');
  t.equal(idCopies, ids.size, 'each chunk id of the map is one string of its own');
  const ofFirst = [...b.records.values()].filter((e) => e.namespace === NAMESPACE).length;
  t.equal(ofFirst, names().length + 1, 'records of the first source');
  // One string of the namespace for the records before the second source's, one for those after.
  t.ok(copies <= 3, `${copies} strings of the namespace for ${ofFirst} records`);
});

t.test('records of one source keep their fields around another source', async (t) => {
  const { store } = fsStore(t);
  const b = await base(store, keys());
  const entries = [...b.records.values()].sort((x, y) => x.seq - y.seq);
  const other = entries.find((e) => e.binding === 'db-primary')!;
  t.equal(other.namespace, 'schema/public', 'the second source keeps its own fields');
  const after = entries[other.seq + 1]!;
  t.equal(after.namespace, NAMESPACE, 'and the record after it is of the first source again');
  t.equal(after.binding, entries[0]!.binding);
});

/**
 * Strings in the heap holding a record line's text (a line, a frame's text, or more), and chunk
 * references as a record line writes them (`id:length`, which JSON.parse copies out of the line).
 */
async function lineTexts(): Promise<{ lines: number; references: number }> {
  // Built at run time, once the snapshot is taken: a literal of these characters in this module,
  // or the string made before, would be such a string itself.
  let marker: string | undefined;
  let lines = 0;
  let references = 0;
  await eachHeapString((_type, name) => {
    marker ??= ['"sha384":', '"sha384:'].join('');
    if (name.includes(marker)) lines++;
    if (/^[0-9a-f]{64}:\d+$/.test(name)) references++;
  });
  return { lines, references };
}

t.test('a reader keeps its records, not the index text they were parsed from', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records());
  const run = await openRun(store, { job: JOB, runId: 'run-0001', secretKey: k.breakGlass.secretKey });
  const entries: IndexEntry[] = [];
  for await (const e of run.records()) entries.push(e);
  t.equal(entries.length, names().length + 2, 'every record');
  // The same records as a base parses (which keeps the lines), field for field.
  const b = await loadChunkedBase(store, { job: JOB, runId: 'run-0001', secretKey: k.operational.secretKey });
  t.same(
    entries,
    [...b!.records.values()].sort((x, y) => x.seq - y.seq),
    'the records a base holds',
  );
  t.ok((await lineTexts()).lines > 0, 'a base holds its lines (the check sees them)');
  t.equal(await (run as unknown as { loaded(): Promise<unknown> }).loaded(), null, 'the reader is no base');
  t.ok(b !== null);
});

t.test('with only the reader alive, no line of the index is in the heap', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records());
  const run = await openRun(store, { job: JOB, runId: 'run-0001', secretKey: k.breakGlass.secretKey });
  const entries: IndexEntry[] = [];
  for await (const e of run.records()) entries.push(e);
  const held = await lineTexts();
  t.equal(held.lines, 0, 'no string holds a record line');
  t.equal(held.references, 0, 'nor a chunk reference as the line writes it (each id is its own)');
  t.equal(entries.length, names().length + 2, 'while every record is held');
  // And the records still read.
  let n = 0;
  for await (const r of run.readRecords(entries)) {
    n++;
    r.release();
  }
  t.equal(n, entries.length, 'every record reads');
});
