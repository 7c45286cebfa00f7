/**
 * The chain stays linear with two real engine processes (apps/engine/src/main.ts as child
 * processes) on one PostgreSQL (the testkit server), appending concurrently over HTTP: afterwards
 * verify is ok on both, seqs run 1..head without gaps or duplicates, and every write is there.
 */
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngineProcess } from '../helpers/engine.ts';

// 30 each: the mutating-route rate limit (60 per minute per caller) is shared by both engines.
const PER_ENGINE = 30;

t.test('two engine processes on one PostgreSQL keep one linear chain', async (t) => {
  const db = await postgresUrl();
  const [a, b] = await Promise.all([
    startEngineProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-a-'), ENGINE_DATABASE_URL: db }),
    startEngineProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-b-'), ENGINE_DATABASE_URL: db }),
  ]);
  const auth = bearer();
  const writes: Array<Promise<number>> = [];
  for (let i = 0; i < PER_ENGINE; i++) {
    for (const [name, e] of [
      ['a', a],
      ['b', b],
    ] as const) {
      writes.push(
        http(`${e.url}/admin/jobs`, {
          headers: auth,
          body: { id: `${name}-${i}`, cadenceSeconds: 3600, source: { type: 'files', path: '/srv' } },
        }).then((r) => r.status),
      );
    }
  }
  const statuses = await Promise.all(writes);
  t.same([...new Set(statuses)], [200], 'every write applied');

  const va = (await http(`${a.url}/admin/audit/verify`, { headers: auth })).json();
  const vb = (await http(`${b.url}/admin/audit/verify`, { headers: auth })).json();
  t.equal(va.ok, true, 'verify ok on engine a');
  t.equal(vb.ok, true, 'verify ok on engine b');
  t.equal(va.headHash, vb.headHash, 'both see one head');

  const exported = (await http(`${a.url}/admin/audit/export`, { headers: auth })).json();
  const seqs = exported.events.map((e: { seq: number }) => e.seq);
  t.same(
    seqs,
    Array.from({ length: exported.headSeq }, (_, i) => i + 1),
    'seq 1..head, no gaps, no duplicates',
  );
  const upserts = exported.events.filter((e: { action: string }) => e.action === 'job-upsert');
  t.equal(upserts.length, 2 * PER_ENGINE, 'every write has its event');
  t.equal(new Set(upserts.map((e: { target: string }) => e.target)).size, 2 * PER_ENGINE);
});
