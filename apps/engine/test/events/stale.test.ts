// `backup-stale` through a real engine whose run clock the test moves: an enabled job whose latest
// ok run is older than max(2 * cadence, cadence + 1 h) is raised once by the scheduler's tick, not
// again at later ticks nor by a second engine on the same state store (the latch lives there);
// the next ok run ends the episode, and a later one is raised again. Paused jobs never.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { STALE_PREFIX, staleThresholdSeconds } from '../../src/runs/index.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { writeTree } from '../runs/helpers/world.ts';
import { collect, delivered } from './helpers.ts';

const HOUR = 3_600_000;

t.test('the stale threshold', async (t) => {
  t.equal(staleThresholdSeconds(3600), 7200, 'hourly: two hours');
  t.equal(staleThresholdSeconds(86_400), 172_800, 'daily: two days');
  t.equal(staleThresholdSeconds(300), 3900, 'five minutes: cadence plus an hour');
});

t.test('backup-stale: raised once per episode, cleared by the next ok run', async (t) => {
  const root = tempDir(t, 'coffer-events-stale-');
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha' });
  let offset = 0;
  const now = () => new Date(Date.now() + offset);
  const env = {
    ENGINE_DATA_DIR: join(root, 'data'),
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
    HARNESS_TEST_FAULTS: '1',
  };
  const e = await startEngine(t, env, { runs: { now } });
  const c = collect(e.app);
  const post = (path: string, body: unknown = {}) =>
    http(`${e.url}/admin${path}`, { headers: bearer(), body });
  t.equal(
    (await post('/jobs', { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: source } }))
      .status,
    200,
  );
  t.equal(
    (
      await post('/jobs', {
        id: 'paused',
        cadenceSeconds: 3600,
        enabled: false,
        source: { type: 'files', path: source },
      })
    ).status,
    200,
  );
  const first = (await post('/trigger', { id: 'docs' })).json().runId as string;
  await e.app.runs.idle();
  t.same(await e.app.runs.checkStale(), [], 'fresh after an ok run');

  // Three hours on (threshold two): the job's runs now fail, so the tick's dispatch does not end it.
  await post('/test-fault/arm', { target: 'destination', fault: 'access-denied', times: 0 });
  offset = 3 * HOUR;
  await e.app.runs.tick('test');
  await e.app.runs.idle();
  await delivered();
  const stale = c.named('backup-stale');
  t.equal(stale.length, 1, 'raised by the tick');
  t.match(stale[0], {
    name: 'backup-stale',
    jobId: 'docs',
    detail: { thresholdSeconds: 7200, cadenceSeconds: 3600, lastOkRunId: first, lastOkAt: /Z$/ },
  });
  t.ok(Number(stale[0]?.detail.ageSeconds) >= 3 * 3600 - 60);
  t.equal(c.named('run-failed').length, 1, 'the tick dispatched a run, which failed');
  t.match(await e.app.state.settings.get(`${STALE_PREFIX}docs`), { lastOkRunId: first });
  t.notOk(await e.app.state.settings.get(`${STALE_PREFIX}paused`), 'a paused job is never stale');

  // Later ticks, and a second engine on the same state store, do not repeat it.
  offset = 3.5 * HOUR;
  await e.app.runs.tick('test');
  await e.app.runs.idle();
  t.same(await e.app.runs.checkStale(), []);
  const other = await startEngine(t, { ...env, ENGINE_DATA_DIR: join(root, 'data') }, { runs: { now } });
  t.same(await other.app.runs.checkStale(), [], 'another engine sees the latch');
  await other.app.close();
  await delivered();
  t.equal(c.named('backup-stale').length, 1, 'still once');

  // The next ok run ends the episode.
  await post('/test-fault/disarm');
  const ok = (await post('/trigger', { id: 'docs' })).json().runId as string;
  await e.app.runs.idle();
  t.equal((await e.app.state.runs.get(ok))?.status, 'ok');
  t.equal(await e.app.state.settings.get(`${STALE_PREFIX}docs`), undefined, 'latch removed by the ok run');
  t.same(await e.app.runs.checkStale(), [], 'fresh again');

  // A new episode is raised again, once.
  offset = 6.5 * HOUR;
  t.same(await e.app.runs.checkStale(), ['docs']);
  t.same(await e.app.runs.checkStale(), []);
  await delivered();
  const again = c.named('backup-stale');
  t.equal(again.length, 2);
  t.equal(again[1]?.detail.lastOkRunId, ok, 'the second episode names the newer ok run');

  // A deleted job's latch goes with it.
  t.equal((await post('/jobs/delete', { id: 'docs' })).status, 200);
  await e.app.runs.checkStale();
  t.equal(await e.app.state.settings.get(`${STALE_PREFIX}docs`), undefined);
});
