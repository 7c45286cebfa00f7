// The delivery history is a ring of the newest 1000 records, newest first.
import t from 'tap';
import { DeliveryHistory, type DeliveryRecord } from '../src/index.ts';

const rec = (i: number): DeliveryRecord => ({
  id: `r${i}`,
  at: new Date(1_700_000_000_000 + i).toISOString(),
  messageId: `m${i}`,
  event: 'backup-failure',
  severity: 'critical',
  channelId: 'c',
  channelKind: 'webhook',
  accepted: true,
  test: false,
  attempt: 1,
  willRetry: false,
  detail: 'run failed',
});

t.test('a ring of 1000, newest first', async (t) => {
  const h = new DeliveryHistory();
  t.equal(h.capacity, 1000);
  t.same(h.list(), []);
  for (let i = 0; i < 3; i++) h.add(rec(i));
  t.same(
    h.list().map((r) => r.id),
    ['r2', 'r1', 'r0'],
  );
  for (let i = 3; i < 1205; i++) h.add(rec(i));
  t.equal(h.size, 1000);
  const ids = h.list().map((r) => r.id);
  t.equal(ids[0], 'r1204');
  t.equal(ids[999], 'r205');
  t.equal(new Set(ids).size, 1000);
  const small = new DeliveryHistory(2);
  [rec(1), rec(2), rec(3)].forEach(small.add);
  t.same(
    small.list().map((r) => r.id),
    ['r3', 'r2'],
  );
});
