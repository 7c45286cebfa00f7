// RecordParts (src/record-parts.ts): a record readRecords hands over in parts, as one streaming
// body for a writer. Parts here are RecordRead values built by hand, each counting its release,
// so when a part is given back is exact; chunk-stream.test.ts covers the reader that produces them.
import t from 'tap';
import { type IndexEntry, RecordParts, type RecordRead, recordsToWrite } from '../src/index.ts';

t.test(
  'a record in parts as one body: each part released once written, the reader held back, errors end it',
  async (t) => {
    const entry = { name: 'big' } as unknown as IndexEntry;
    const released: number[] = [];
    const part = (index: number, last: boolean, ...bytes: number[]): RecordRead => ({
      entry,
      pieces: bytes.map((b) => Uint8Array.of(b)),
      part: { index, last },
      release: () => released.push(index),
    });
    const interrupted = () => new Error('interrupted');

    // In order, released as written, ended by the last part.
    const feed = new RecordParts(undefined, interrupted);
    t.ok(feed.push(part(0, false, 1, 2)));
    const it = feed.body()[Symbol.asyncIterator]();
    t.same((await it.next()).value, Uint8Array.of(1));
    t.same(released, [], 'a part is held while its pieces are written');
    t.same((await it.next()).value, Uint8Array.of(2));
    // Back-pressure: one part waiting holds the reader until the writer takes it.
    let roomy = false;
    feed.push(part(1, false, 3));
    const room = feed.room().then(() => {
      roomy = true;
    });
    await new Promise((r) => setImmediate(r));
    t.notOk(roomy, 'the reader waits while a part is queued');
    const next = it.next();
    t.same((await next).value, Uint8Array.of(3));
    await room;
    t.same(released, [0], 'part 0 released once the writer asked for more');
    feed.push(part(2, true, 4));
    t.same((await it.next()).value, Uint8Array.of(4));
    t.same(await it.next(), { value: undefined, done: true }, 'the body ends after the last part');
    t.same(released, [0, 1, 2]);
    t.notOk(feed.push(part(3, true)), 'nothing is queued after the end');
    t.same(released, [0, 1, 2, 3], 'a part pushed after the end is released at once');

    // The reader fails between parts: the body throws its error (the writer drops its temporary file).
    released.length = 0;
    const failing = new RecordParts(undefined, interrupted);
    failing.push(part(0, false, 1));
    const body = failing.body()[Symbol.asyncIterator]();
    await body.next();
    const tampered = Object.assign(new Error('record tampered'), { code: 'ERR_ARCHIVE_RECORD_TAMPERED' });
    const pending = body.next();
    failing.fail(tampered);
    await t.rejects(pending, tampered, 'the reader’s error, unchanged');
    t.same(released, [0]);

    // The writer gave up mid-part (its write failed): close releases the part it held and those queued.
    released.length = 0;
    const abandoned = new RecordParts(undefined, interrupted);
    abandoned.push(part(0, false, 1, 2));
    const gen = abandoned.body()[Symbol.asyncIterator]();
    await gen.next();
    abandoned.push(part(1, false, 3));
    abandoned.close();
    await new Promise((r) => setImmediate(r));
    t.same(released.sort(), [0, 1], 'the part being written and the queued one');
    t.notOk(abandoned.push(part(2, true)), 'the reader learns the write ended');
    await abandoned.room();
    t.pass('a closed feed never holds the reader');

    // A cancel: the body stops before the next part.
    const controller = new AbortController();
    const cancelled = new RecordParts(controller.signal, interrupted);
    cancelled.push(part(0, false, 1));
    const c = cancelled.body()[Symbol.asyncIterator]();
    await c.next();
    cancelled.push(part(1, true, 2));
    controller.abort();
    await t.rejects(c.next(), /interrupted/);
  },
);

t.test(
  'recordsToWrite: one item per record, a record in parts fed while the next is asked for',
  async (t) => {
    const released: string[] = [];
    const read = (name: string, bytes: number[], part?: { index: number; last: boolean }): RecordRead => ({
      entry: { name } as unknown as IndexEntry,
      pieces: bytes.map((b) => Uint8Array.of(b)),
      ...(part === undefined ? {} : { part }),
      release: () => released.push(`${name}${part === undefined ? '' : `#${part.index}`}`),
    });
    const interrupted = () => new Error('interrupted');
    async function* reads(fail?: Error): AsyncGenerator<RecordRead> {
      yield read('a', [1]);
      yield read('big', [2], { index: 0, last: false });
      yield read('big', [3], { index: 1, last: false });
      if (fail !== undefined) throw fail;
      yield read('big', [4], { index: 2, last: true });
      yield read('z', [5]);
    }

    const names: string[] = [];
    const bodies: Promise<number[]>[] = [];
    for await (const rec of recordsToWrite(reads(), { interrupted })) {
      names.push(rec.entry.name);
      if (rec.parts === null) {
        t.same(
          rec.pieces!.map((p) => p[0]),
          rec.entry.name === 'a' ? [1] : [5],
        );
        rec.release();
      } else {
        const parts = rec.parts;
        // The write runs beside the loop, as a writer in flight does.
        bodies.push(
          (async () => {
            const got: number[] = [];
            for await (const piece of parts.body()) got.push(piece[0]!);
            rec.release();
            return got;
          })(),
        );
      }
    }
    t.same(names, ['a', 'big', 'z'], 'one item per record, in order');
    t.same(await Promise.all(bodies), [[2, 3, 4]], "the record's parts, as one body");
    t.same(released.sort(), ['a', 'big#0', 'big#1', 'big#2', 'z'], 'every part released');

    // The reader fails while the record's parts are still coming: its body fails with that error.
    const tampered = new Error('record tampered');
    let body: Promise<unknown> | undefined;
    await t.rejects(
      (async () => {
        for await (const rec of recordsToWrite(reads(tampered), { interrupted })) {
          if (rec.parts !== null) {
            const parts = rec.parts;
            body = (async () => {
              for await (const _ of parts.body()) void _;
            })();
            body.catch(() => undefined);
          } else rec.release();
        }
      })(),
      tampered,
      'the reader’s error comes out of the loop',
    );
    await t.rejects(body!, tampered, 'and ends the body being written');
  },
);
