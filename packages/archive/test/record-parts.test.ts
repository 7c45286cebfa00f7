// RecordParts (src/record-parts.ts): a record readRecords hands over in parts, as one streaming
// body for a writer. Parts here are RecordRead values built by hand, each counting its release,
// so when a part is given back is exact; chunk-stream.test.ts covers the reader that produces them.
import t from 'tap';
import { type IndexEntry, RecordParts, type RecordRead } from '../src/index.ts';

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
