/**
 * A restore of the run whose base the engine keeps for the job's next run (src/runs/base-cache.ts
 * `peek`, src/restores/plan-options.ts): the plan's reader opens the index with the kept base's
 * records (and reads through its chunk map, read-only), so it shares them instead of holding a
 * second copy; the base stays kept, untouched, for the next run; a restore of any other run, or of
 * another destination, gets nothing from it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RestoreRequest } from '@coffer/restore';
import t from 'tap';
import { incrementalJob, restoreWorld } from './helpers.ts';

const files: Record<string, string> = {};
for (let i = 0; i < 30; i++) files[`f${String(i).padStart(2, '0')}.txt`] = `file ${i}\n`.repeat(40 + i);
const request = (runId: string): RestoreRequest => ({
  runId,
  confirm: false,
  include: [],
  exclude: [],
  onExisting: 'skip',
});
const w = await restoreWorld(t);
const app = w.e.app;

t.test('the kept base’s run is planned with its records; the base stays for the next run', async (t) => {
  const latest = await incrementalJob(w, 'kb', files, { 'f03.txt': 'changed\n' });
  const first = (await app.state.runs.listForJob('kb')).find((r) => r.id !== latest)!.id;
  const store = app.destinations.get('default')!;
  const op = app.keys.operational.publicKey;
  const kept = app.runs.baseCache.peek(store, 'kb', latest, op);
  t.ok(kept, 'the read-back kept the latest run as the next base');
  t.equal(app.runs.baseCache.peek(store, 'kb', first, op), null, 'not for another run');
  t.equal(app.runs.baseCache.peek(store, 'kb', latest, new Uint8Array(32)), null, 'not for another key');
  // The chunk map goes with it, lent read-only to the plan's reader: it must come back unchanged.
  const map = (kept as unknown as { map: { chunks: Map<string, unknown>; packs: Map<string, unknown> } }).map;
  const mapBefore = { chunks: [...map.chunks.keys()].sort(), packs: [...map.packs.keys()].sort() };

  const opts = await app.restores.planOptions(request(latest));
  t.equal(
    opts.knownRecords?.records,
    kept!.records,
    'the plan of the latest run is given the base’s records',
  );
  t.equal(opts.knownRecords?.lines, kept!.lines);
  const older = await app.restores.planOptions(request(first));
  t.equal(older.knownRecords, undefined, 'an older run is planned without them');

  // The apply reads through them and writes exactly the run's files.
  const view = await w.apply({ runId: latest, confirm: true, target: { namespaceId: join(w.roots, 'kb') } });
  t.equal(view.status, 'succeeded', JSON.stringify(view));
  for (const [name, body] of Object.entries({ ...files, 'f03.txt': 'changed\n' }))
    t.equal(readFileSync(join(w.roots, 'kb', name), 'utf8'), body, name);

  t.same(
    { chunks: [...map.chunks.keys()].sort(), packs: [...map.packs.keys()].sort() },
    mapBefore,
    'the base’s chunk map is as it was kept',
  );

  // Peeking took nothing: the next run still finds its base (it is taken once, then replaced).
  t.equal(app.runs.baseCache.size, 1);
  t.equal(
    app.runs.baseCache.take(store, 'kb', latest, op)?.records,
    kept!.records,
    'the same base, still kept',
  );
});
