/** Jobs: every row and reason of the ifMatchRev table, changedFields, deletedRev, tombstones. */
import type { Test } from 'tap';
import { failsWith, type MakeTarget, refusal } from './suite.ts';

const SPEC_KEYS = ['changedAt', 'changedFields', 'currentRev', 'id', 'reason', 'yourRev'];

export async function jobsSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('key absent: create, update, unchanged rewrite', async (t) => {
    const s = await (await makeTarget(t)).open();
    const a = await s.jobs.upsert({
      id: 'docs',
      cadenceSeconds: 3600,
      source: { type: 'files', path: '/d' },
    });
    t.equal(a.outcome, 'created');
    t.equal(a.job.configRev, 1, 'first revision is 1');
    t.same(a.changedFields, ['cadenceSeconds', 'id', 'source']);
    t.equal(a.previousRev, null);
    const b = await s.jobs.upsert({ id: 'docs', cadenceSeconds: 60, source: { type: 'files', path: '/d' } });
    t.equal(b.outcome, 'updated');
    t.equal(b.job.configRev, 2);
    t.same(b.changedFields, ['cadenceSeconds'], 'only the changed field is named');
    t.same(b.job.lastChangedFields, ['cadenceSeconds']);
    t.equal(b.previousRev, 1);
    // Same content with keys in another order: a configuration write that changes nothing.
    const c = await s.jobs.upsert({ source: { path: '/d', type: 'files' }, cadenceSeconds: 60, id: 'docs' });
    t.equal(c.outcome, 'unchanged');
    t.equal(c.job.configRev, 2, 'an unchanged rewrite does not bump configRev');
    t.same(c.changedFields, []);
    const got = await s.jobs.get('docs');
    t.equal(got?.configRev, 2);
    t.same(got?.config, { id: 'docs', cadenceSeconds: 60, source: { type: 'files', path: '/d' } });
    t.equal(got?.changedAt, b.job.changedAt, 'changedAt is the last configuration change');
    t.equal(await s.jobs.get('nope'), null);
    const withMeta = await s.jobs.upsert({
      id: 'docs',
      cadenceSeconds: 60,
      source: { type: 'files', path: '/d' },
      ifMatchRev: 2,
    });
    t.equal(withMeta.outcome, 'unchanged', 'an ifMatchRev key inside the body is not configuration');
    t.notOk('ifMatchRev' in withMeta.job.config);
    const removed = await s.jobs.upsert({ id: 'docs', source: { type: 'files', path: '/d' } });
    t.same(removed.changedFields, ['cadenceSeconds'], 'a removed field counts as changed');
  });

  t.test(
    'guard: sees the stored config inside the transaction; what it throws aborts the write',
    async (t) => {
      const s = await (await makeTarget(t)).open();
      const seen: unknown[] = [];
      const job = { id: 'g', cadenceSeconds: 3600, source: { type: 'files', path: '/d' } };
      await s.jobs.upsert(job, { guard: (stored) => void seen.push(stored) });
      await s.jobs.upsert({ ...job, cadenceSeconds: 60 }, { guard: (stored) => void seen.push(stored) });
      t.same(seen, [null, job], 'null for no live job, then the stored configuration');
      class Refused extends Error {}
      const thrown = await s.jobs
        .upsert(
          { ...job, cadenceSeconds: 5 },
          {
            guard: () => {
              throw new Refused('no');
            },
          },
        )
        .catch((e: unknown) => e);
      t.ok(thrown instanceof Refused, 'rethrown unchanged');
      t.equal((await s.jobs.get('g'))?.configRev, 2, 'nothing written');
      t.equal((await s.jobs.get('g'))?.config.cadenceSeconds, 60);
    },
  );

  t.test('integer N: applied at N, base-moved otherwise with the union of changed fields', async (t) => {
    const s = await (await makeTarget(t)).open();
    const secret = 'value-never-in-precondition-7f3a';
    await s.jobs.upsert(
      { id: 'j', cadenceSeconds: 1, enabled: true, retention: { keepLast: 3 } },
      { ifMatchRev: null },
    );
    const r2 = await s.jobs.upsert(
      { id: 'j', cadenceSeconds: 2, enabled: true, retention: { keepLast: 3 } },
      { ifMatchRev: 1 },
    );
    t.equal(r2.job.configRev, 2, 'applied when stored revision is N');
    await s.jobs.upsert(
      { id: 'j', cadenceSeconds: 2, enabled: false, retention: { keepLast: 3 }, note: secret },
      { ifMatchRev: 2 },
    );
    const p = await refusal(
      t,
      s.jobs.upsert({ id: 'j', cadenceSeconds: 9 }, { ifMatchRev: 1 }),
      'base-moved',
      'stale N',
    );
    t.same(Object.keys(p).sort(), SPEC_KEYS, 'exactly the specification fields');
    t.equal(p.id, 'j');
    t.equal(p.yourRev, 1);
    t.equal(p.currentRev, 3);
    t.same(
      p.changedFields,
      ['cadenceSeconds', 'enabled', 'note'],
      'fields changed after revision 1 (revs 2 and 3), names only',
    );
    t.equal(p.changedAt, (await s.jobs.get('j'))?.changedAt);
    t.notOk(JSON.stringify(p).includes(secret), 'no field value in the precondition');
    const older = await refusal(t, s.jobs.upsert({ id: 'j' }, { ifMatchRev: 0 }), 'base-moved', 'N = 0');
    t.same(
      older.changedFields,
      ['cadenceSeconds', 'enabled', 'id', 'note', 'retention'],
      'from 0: every field',
    );
    const ahead = await refusal(t, s.jobs.upsert({ id: 'j' }, { ifMatchRev: 7 }), 'base-moved', 'N ahead');
    t.same(ahead.changedFields, []);
    t.equal((await s.jobs.get('j'))?.configRev, 3, 'refusals write nothing');
  });

  t.test('null: created if absent, already-exists if present', async (t) => {
    const s = await (await makeTarget(t)).open();
    const a = await s.jobs.upsert({ id: 'n' }, { ifMatchRev: null });
    t.equal(a.outcome, 'created');
    const p = await refusal(
      t,
      s.jobs.upsert({ id: 'n', x: 1 }, { ifMatchRev: null }),
      'already-exists',
      'null on live',
    );
    t.equal(p.currentRev, 1);
    t.equal(p.yourRev, null);
    t.same(p.changedFields, []);
  });

  t.test('delete: deletedRev, already-deleted, base-moved, null refused, ring dropped', async (t) => {
    const s = await (await makeTarget(t)).open();
    await s.jobs.upsert({ id: 'd', cadenceSeconds: 1 });
    await s.jobs.upsert({ id: 'd', cadenceSeconds: 2 });
    await s.runs.start({ id: 'r1', jobId: 'd' });
    await s.checkpoints.put('r1', 'd', new Uint8Array([1, 2, 3]));
    const moved = await refusal(t, s.jobs.delete('d', { ifMatchRev: 1 }), 'base-moved', 'delete stale N');
    t.same(moved.changedFields, ['cadenceSeconds']);
    const nul = await refusal(
      t,
      s.jobs.delete('d', { ifMatchRev: null }),
      'already-exists',
      'delete with null',
    );
    t.equal(nul.currentRev, 2);
    const del = await s.jobs.delete('d', { ifMatchRev: 2 });
    t.equal(del.deletedRev, 2, 'deletedRev is the revision deleted');
    t.equal(del.id, 'd');
    t.equal(await s.jobs.get('d'), null);
    t.same(await s.jobs.getTombstone('d'), { id: 'd', deletedRev: 2, deletedAt: del.deletedAt });
    t.same(await s.runs.listForJob('d'), [], 'history ring dropped');
    t.equal(await s.checkpoints.get('r1'), null, 'checkpoints dropped');
    t.equal((await s.runs.counters('d')).runsRetainedCount, 0);
    for (const rev of [undefined, 2, null]) {
      const p = await refusal(
        t,
        s.jobs.delete('d', { ifMatchRev: rev }),
        'already-deleted',
        `delete again (${rev})`,
      );
      t.equal(p.currentRev, null);
      t.equal(p.changedAt, del.deletedAt);
    }
    await refusal(t, s.jobs.delete('never'), 'already-deleted', 'delete never-existed');
    const fresh = await s.jobs.upsert({ id: 'keep' });
    const d2 = await s.jobs.delete('keep');
    t.equal(d2.deletedRev, fresh.job.configRev, 'delete without ifMatchRev applies');
  });

  t.test('tombstones: deleted-under-you, resurrect-refused, deliberate recreate', async (t) => {
    const s = await (await makeTarget(t)).open();
    await s.jobs.upsert({ id: 't', a: 1 });
    await s.jobs.upsert({ id: 't', a: 2 });
    await s.jobs.upsert({ id: 't', a: 3 });
    await s.jobs.delete('t');
    const u = await refusal(
      t,
      s.jobs.upsert({ id: 't', a: 4 }, { ifMatchRev: 3 }),
      'deleted-under-you',
      'N on deleted',
    );
    t.equal(u.yourRev, 3);
    t.equal(u.currentRev, null);
    await refusal(
      t,
      s.jobs.upsert({ id: 'ghost' }, { ifMatchRev: 1 }),
      'deleted-under-you',
      'N on never-existed',
    );
    await refusal(
      t,
      s.jobs.upsert({ id: 't' }, { ifMatchRev: null }),
      'resurrect-refused',
      'null on deleted',
    );
    t.equal(await s.jobs.get('t'), null, 'still deleted');
    const back = await s.jobs.upsert({ id: 't', a: 5 });
    t.equal(back.outcome, 'recreated');
    t.equal(back.previousRev, 3);
    t.equal(back.job.configRev, 4, 'numbering continues after deletedRev');
    t.equal(await s.jobs.getTombstone('t'), null, 'tombstone gone once live again');
    await refusal(t, s.jobs.upsert({ id: 't' }, { ifMatchRev: 3 }), 'base-moved', 'old-incarnation N');
  });

  t.test('precondition-unreadable and invalid input', async (t) => {
    const s = await (await makeTarget(t)).open();
    await s.jobs.upsert({ id: 'u' });
    for (const bad of [1.5, -1, Number.NaN, '1', {}] as unknown as number[]) {
      await refusal(
        t,
        s.jobs.upsert({ id: 'u' }, { ifMatchRev: bad }),
        'precondition-unreadable',
        `upsert ${String(bad)}`,
      );
      await refusal(
        t,
        s.jobs.delete('u', { ifMatchRev: bad }),
        'precondition-unreadable',
        `delete ${String(bad)}`,
      );
    }
    await failsWith(t, s.jobs.upsert({ id: '' }), 'ERR_STATE_INVALID', 'empty id');
    await failsWith(t, s.jobs.upsert([] as never), 'ERR_STATE_INVALID', 'not an object');
    await failsWith(t, s.jobs.upsert({ id: 'big', n: 10n } as never), 'ERR_STATE_INVALID', 'not JSON');
  });

  t.test('two processes racing on one revision: exactly one applies', async (t) => {
    const target = await makeTarget(t);
    const a = await target.open();
    const b = await target.open();
    await a.jobs.upsert({ id: 'race', v: 0 });
    for (let round = 1; round <= 5; round++) {
      const rev = (await a.jobs.get('race'))?.configRev as number;
      const results = await Promise.allSettled([
        a.jobs.upsert({ id: 'race', v: `a${round}` }, { ifMatchRev: rev }),
        b.jobs.upsert({ id: 'race', v: `b${round}` }, { ifMatchRev: rev }),
      ]);
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      const refused = results.filter(
        (r) =>
          r.status === 'rejected' &&
          (r.reason as { precondition?: { reason: string } }).precondition?.reason === 'base-moved',
      ).length;
      t.equal(ok, 1, `round ${round}: one write applied`);
      t.equal(refused, 1, `round ${round}: the other refused base-moved`);
    }
    t.equal((await b.jobs.get('race'))?.configRev, 6);
    const creates = await Promise.allSettled([
      a.jobs.upsert({ id: 'new' }, { ifMatchRev: null }),
      b.jobs.upsert({ id: 'new' }, { ifMatchRev: null }),
    ]);
    t.equal(creates.filter((r) => r.status === 'fulfilled').length, 1, 'one create-if-absent wins');
    t.same(
      (await a.jobs.list()).map((j) => j.id),
      ['new', 'race'],
    );
  });
}
