import t from 'tap';
import { readAhead } from '../../src/runs/feed.ts';

interface Item {
  name: string;
  size: number;
}

async function* itemsOf(list: Item[], opened: string[]): AsyncGenerator<Item> {
  for (const i of list) {
    opened.push(`list:${i.name}`);
    yield i;
  }
}

const bytesOf = (i: Item) => Buffer.alloc(i.size, i.name.charCodeAt(0));

t.test(
  'small records come through reused slots, in order, each valid until the next is asked for',
  async (t) => {
    const list: Item[] = [];
    for (let n = 0; n < 40; n++) list.push({ name: String.fromCharCode(65 + (n % 26)) + n, size: 100 + n });
    const slotsSeen = new Set<ArrayBufferLike>();
    const offsets = new Set<number>();
    const got: string[] = [];
    const ahead = readAhead(
      itemsOf(list, []),
      async () => {
        throw new Error('read() is not used for small records when readInto is given');
      },
      (i) => i.size,
      {
        concurrency: 4,
        budgetBytes: 1 << 20,
        smallBytes: 1024,
        readInto: async (i, buffer) => {
          await new Promise((r) => setTimeout(r, (i.size * 7) % 3));
          const b = bytesOf(i);
          buffer.set(b);
          return buffer.subarray(0, b.length);
        },
      },
    );
    for await (const { item, body, error } of ahead) {
      t.equal(error, null);
      t.ok(body instanceof Uint8Array);
      const b = body as Uint8Array;
      t.same(Buffer.from(b), bytesOf(item), `${item.name} intact when yielded`);
      slotsSeen.add(b.buffer);
      offsets.add(b.byteOffset);
      got.push(item.name);
    }
    t.same(
      got,
      list.map((i) => i.name),
      'strict order',
    );
    t.equal(slotsSeen.size, 1, 'one allocation for every slot');
    t.ok(offsets.size <= 5, `at most concurrency + 1 slots (${offsets.size})`);
  },
);

t.test('no read is opened beyond a large record until it was consumed; errors stay in order', async (t) => {
  const list: Item[] = [
    { name: 'a', size: 10 },
    { name: 'L1', size: 5000 },
    { name: 'b', size: 10 },
    { name: 'bad', size: 10 },
    { name: 'L2', size: 6000 },
    { name: 'c', size: 10 },
  ];
  const events: string[] = [];
  const large = Buffer.alloc(4096);
  const buffers: (Uint8Array | undefined)[] = [];
  const ahead = readAhead(
    itemsOf(list, events),
    async (i, buffer) => {
      events.push(`open:${i.name}`);
      buffers.push(buffer);
      return (async function* () {
        yield bytesOf(i);
      })();
    },
    (i) => i.size,
    {
      concurrency: 8,
      budgetBytes: 1 << 20,
      smallBytes: 1024,
      largeBuffer: large,
      readInto: async (i, buffer) => {
        if (i.name === 'bad') throw Object.assign(new Error('gone'), { code: 'ERR_SOURCE_RECORD_VANISHED' });
        events.push(`into:${i.name}`);
        const b = bytesOf(i);
        buffer.set(b);
        return buffer.subarray(0, b.length);
      },
    },
  );
  const order: string[] = [];
  for await (const { item, body, error } of ahead) {
    order.push(error === null ? item.name : `${item.name}!`);
    if (item.name === 'L1') {
      t.notOk(events.includes('list:b'), 'nothing listed past L1 while it streams');
      let n = 0;
      for await (const c of body as AsyncIterable<Uint8Array>) n += c.length;
      t.equal(n, 5000);
    }
    if (item.name === 'L2') {
      for await (const _ of body as AsyncIterable<Uint8Array>);
      t.notOk(events.includes('list:c'), 'nothing listed past L2 while it streams');
    }
  }
  t.same(order, ['a', 'L1', 'b', 'bad!', 'L2', 'c']);
  t.same(buffers, [large, large], 'large records stream through the one large buffer');
});
