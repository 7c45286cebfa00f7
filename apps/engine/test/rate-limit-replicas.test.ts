/**
 * The mutating-route rate limit is shared by engine replicas (issue 13 item 16): two engine
 * processes (apps/engine/src/main.ts) on one PostgreSQL, one caller's requests split across both,
 * are refused at the same total as on one engine (the default 60 per 60 s window), not at twice it.
 */
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngineProcess } from './helpers/engine.ts';

const LIMIT = 60; // the engine's default: 60 mutating requests per caller per 60 s

const job = (id: string) => ({ id, cadenceSeconds: 3600, source: { type: 'files', path: '/srv' } });

t.test('two engines on one PostgreSQL refuse one caller at the shared total', async (t) => {
  const db = await postgresUrl();
  const [a, b] = await Promise.all([
    startEngineProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-a-'), ENGINE_DATABASE_URL: db }),
    startEngineProcess(t, { ENGINE_DATA_DIR: tempDir(t, 'engine-b-'), ENGINE_DATABASE_URL: db }),
  ]);
  const engines = [a, b];
  const statuses: number[] = [];
  let last: Awaited<ReturnType<typeof http>> | null = null;
  for (let i = 0; i < LIMIT; i++) {
    last = await http(`${engines[i % 2]!.url}/admin/jobs`, { headers: bearer(), body: job(`j-${i}`) });
    statuses.push(last.status);
  }
  t.same([...new Set(statuses)], [200], `${LIMIT} writes split over both engines are all applied`);
  t.match(last?.headers.get('ratelimit') ?? '', /;r=0;/, 'the last one used the shared quota up');

  for (const [name, e] of [
    ['a', a],
    ['b', b],
  ] as const) {
    const r = await http(`${e.url}/admin/jobs`, { headers: bearer(), body: job(`over-${name}`) });
    t.equal(r.status, 429, `engine ${name} refuses the caller past the shared total`);
    t.equal(r.json().error, 'rate limited');
    t.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After in whole seconds');
    t.equal(r.headers.get('ratelimit-policy'), `"mutations";q=${LIMIT};w=60`);
  }
  const listed = (await http(`${a.url}/admin/jobs`, { headers: bearer() })).json();
  const ids = (listed.jobs as { id: string }[]).map((j) => j.id);
  t.notOk(ids.includes('over-a') || ids.includes('over-b'), 'a refused write changed nothing');
});
