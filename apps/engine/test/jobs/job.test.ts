// The typed view of a stored job and the one destinations rule (src/jobs/job.ts), against rows as
// a real SQLite state store returns them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openState } from '@coffer/state';
import t from 'tap';
import { Value } from 'typebox/value';
import { jobDestinations, normaliseJob, runJobOf, StoredJob } from '../../src/jobs/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'coffer-jobs-'));
const state = await openState({ dataDir: dir });
t.teardown(async () => {
  await state.close();
  rmSync(dir, { recursive: true, force: true });
});

t.test('a job written through the schema reads back as the stored shape', async (t) => {
  const job = normaliseJob({
    id: 'docs',
    cadenceSeconds: 3600,
    source: { type: 'files', path: '/srv/docs' },
  });
  t.ok(Value.Check(StoredJob, job), 'normaliseJob produces the stored schema');
  await state.jobs.upsert(job);
  const rec = (await state.jobs.get('docs'))!;
  t.ok(Value.Check(StoredJob, rec.config), 'the stored row matches it');
  const view = runJobOf(rec);
  t.equal(view.id, 'docs');
  t.same(view.source, { type: 'files', path: '/srv/docs' });
  t.same(jobDestinations(view), ['default'], 'the default destination is explicit after normalising');
});

t.test('jobDestinations: the list, or the embedded default', async (t) => {
  t.same(jobDestinations({ destinations: ['a', 'b'] }), ['a', 'b']);
  t.same(jobDestinations({}), ['default'], 'missing');
  t.same(jobDestinations({ destinations: [] }), ['default'], 'empty');
  t.same(jobDestinations({ destinations: 'a' }), ['default'], 'not a list');
  t.same(jobDestinations({ destinations: ['a', 7] }), ['default'], 'not all strings');
  const list = ['x'];
  const out = jobDestinations({ destinations: list });
  out.push('y');
  t.same(list, ['x'], 'the caller gets a copy');
});

t.test('a row without a usable source reads as type unknown (its runs fail cleanly)', async (t) => {
  await state.jobs.upsert({ id: 'broken', cadenceSeconds: 3600 });
  const view = runJobOf((await state.jobs.get('broken'))!);
  t.same(view.source, { type: 'unknown' });
  t.equal(view.id, 'broken');
  // A legacy inline redis source (never migrated to a connection) keeps its stored shape.
  await state.jobs.upsert({
    id: 'legacy',
    cadenceSeconds: 3600,
    source: { type: 'redis', url: 'redis://h:1' },
  });
  t.same(runJobOf((await state.jobs.get('legacy'))!).source, { type: 'redis', url: 'redis://h:1' });
});
