/**
 * `skipUnchanged`: an unchanged source is recorded `ok` with `unchangedFrom` and no new archive;
 * any change (content with mtime, a new file, the job's destinations) runs in full; the default
 * (option absent) always seals; retention keeps the archive an unchanged run points to.
 */
import { rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns } from '@coffer/archive';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { runObject } from '../../src/runs/view.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { makeWorld, writeTree } from './helpers/world.ts';

t.test('an unchanged source: ok with unchangedFrom, no new archive; a change runs in full', async (t) => {
  const w = await makeWorld(t);
  const store = w.destinations.get('default')!;
  await w.addJob({ id: 'docs', skipUnchanged: true });
  const first = await w.runNow('docs');
  t.equal(first.status, 'ok');
  t.match(first.detail.sourceFingerprint, /^sha384:[0-9a-f]{96}$/, 'a full run records its fingerprint');

  const second = await w.runNow('docs');
  t.equal(second.status, 'ok', 'unchanged run is ok');
  t.equal(second.detail.unchangedFrom, first.id, 'points at the archive that holds the data');
  t.equal(runObject(second, first).unchangedFrom, first.id, 'the run object shows it');
  t.equal(second.records, first.records);
  t.equal(second.bytes, first.bytes);
  t.match(second.destinations.default, { state: 'verified' });
  t.same(
    (await listRuns(store, 'docs')).map((r) => r.runId),
    [first.id],
    'no second archive was written',
  );
  t.ok(w.logs.some((l) => l.event === 'run-unchanged' && l.runId === second.id));

  // Unchanged again: still points at the first archive (not at the archive-less second run).
  const third = await w.runNow('docs');
  t.equal(third.detail.unchangedFrom, first.id);

  // A content change with a new mtime: a full run.
  writeFileSync(join(w.sourceDir, 'a.txt'), 'alpha, changed\n');
  utimesSync(join(w.sourceDir, 'a.txt'), new Date(), new Date(Date.now() + 5000));
  const fourth = await w.runNow('docs');
  t.equal(fourth.status, 'ok');
  t.equal(fourth.detail.unchangedFrom, null, 'a changed source is sealed again');
  t.equal((await listRuns(store, 'docs')).length, 2);

  // A file removed: a full run as well.
  rmSync(join(w.sourceDir, 'dir', 'b.txt'));
  const fifth = await w.runNow('docs');
  t.equal(fifth.detail.unchangedFrom, null);
  t.equal(fifth.records, 2);

  // The archive an unchanged run points at is gone: a full run, not an ok without data.
  const sixth = await w.runNow('docs');
  t.equal(sixth.detail.unchangedFrom, fifth.id);
  rmSync(join(w.destDirs.default!, 'jobs', 'docs', 'runs', fifth.id, 'shards'), { recursive: true });
  const seventh = await w.runNow('docs');
  t.equal(seventh.status, 'ok');
  t.equal(seventh.detail.unchangedFrom, null, 'a missing base archive means a full run');
});

t.test(
  'without the option every run seals a new archive; turned on, the next full run records a fingerprint',
  async (t) => {
    const w = await makeWorld(t);
    await w.addJob({ id: 'docs' });
    const first = await w.runNow('docs');
    const second = await w.runNow('docs');
    t.equal(second.status, 'ok');
    t.equal(second.detail.unchangedFrom, null);
    t.equal(first.detail.sourceFingerprint, null, 'no fingerprint is computed without the option');
    t.equal(second.detail.sourceFingerprint, null);
    t.equal((await listRuns(w.destinations.get('default')!, 'docs')).length, 2);
    await w.addJob({ id: 'docs', skipUnchanged: true });
    const third = await w.runNow('docs');
    t.equal(third.detail.unchangedFrom, null, 'no fingerprint to compare with: a full run');
    t.match(third.detail.sourceFingerprint, /^sha384:[0-9a-f]{96}$/);
    const fourth = await w.runNow('docs');
    t.equal(fourth.detail.unchangedFrom, third.id, 'the run after it finds the source unchanged');
    t.equal((await listRuns(w.destinations.get('default')!, 'docs')).length, 3);
  },
);

t.test('retention keeps the archive that unchanged runs point to', async (t) => {
  const w = await makeWorld(t);
  const store = w.destinations.get('default')!;
  await w.addJob({ id: 'docs', skipUnchanged: true, retention: { keepLast: 1 } });
  const base = await w.runNow('docs');
  await w.runNow('docs');
  const latest = await w.runNow('docs');
  t.equal(latest.detail.unchangedFrom, base.id);
  await w.service.pruneAll();
  t.same(
    (await listRuns(store, 'docs')).map((r) => r.runId),
    [base.id],
    'the base archive is kept',
  );
});

t.test(
  'over HTTP: the job option, unchangedFrom in the history, one copy in the replication view',
  async (t) => {
    const root = tempDir(t, 'coffer-unchanged-http-');
    const bg = generateRecipient();
    const pub = join(root, 'bg.pub');
    writeFileSync(pub, encodeKeyFile('recipient-public', bg.publicKey));
    const source = join(root, 'source');
    writeTree(source, { 'a.txt': 'alpha', 'b/c.txt': 'charlie' });
    const e = await startEngine(t, { ENGINE_BREAK_GLASS_PUBLIC_KEY: pub });
    const get = (path: string) => http(`${e.url}/admin${path}`, { headers: bearer() });
    const post = (path: string, body: unknown = {}) =>
      http(`${e.url}/admin${path}`, { headers: bearer(), body });
    const job = {
      id: 'docs',
      cadenceSeconds: 3600,
      source: { type: 'files', path: source },
      skipUnchanged: true,
    };
    const saved = await post('/jobs', job);
    t.equal(saved.status, 200, saved.text);
    t.equal((await post('/jobs', { ...job, skipUnchanged: 'yes' })).status, 400, 'a boolean only');
    const run = async () => {
      const r = (await post('/trigger', { id: 'docs' })).json();
      await e.app.runs.idle();
      return r.runId as string;
    };
    const first = await run();
    const second = await run();
    const ring = (await get('/history?id=docs')).json().runs;
    t.match(ring, [
      { runId: second, status: 'ok', unchangedFrom: first },
      { runId: first, status: 'ok', unchangedFrom: null },
    ]);
    const rep = (await get('/replication?id=docs')).json();
    t.match(rep.destinations, [{ id: 'default', lastVerified: { runId: first }, verifiedCopies: 1 }]);
  },
);
