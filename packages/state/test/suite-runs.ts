/** Runs: ring roll-over and counters, status updates, lookups; checkpoints. */
import type { Test } from 'tap';
import { failsWith, type MakeTarget } from './suite.ts';

export async function runsSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('ring roll-over and counters', async (t) => {
    const s = await (await makeTarget(t)).open({ historyLimit: 3 });
    const t0 = Date.parse('2030-01-01T00:00:00Z');
    const at = (i: number) => new Date(t0 + i * 60_000).toISOString();
    for (let i = 1; i <= 5; i++) {
      await s.runs.start({
        id: `a${i}`,
        jobId: 'a',
        startedAt: at(i),
        prevRunId: i > 1 ? `a${i - 1}` : null,
      });
      await s.runs.update(`a${i}`, {
        status: i === 4 ? 'failed' : 'ok',
        reason: i === 4 ? 'source read error' : null,
      });
    }
    await s.runs.start({ id: 'b1', jobId: 'b', trigger: 'schedule' });
    const ring = await s.runs.listForJob('a');
    t.same(
      ring.map((r) => r.id),
      ['a5', 'a4', 'a3'],
      'ring keeps the newest 3, newest first',
    );
    t.equal(ring[0]?.prevRunId, 'a4');
    t.equal(ring[1]?.reason, 'source read error');
    t.ok(ring[0]?.finishedAt, 'a final status stamps finishedAt');
    t.same(await s.runs.counters(), {
      runsRecordedTotal: 6,
      runsRetainedCount: 4,
      runsRolledOverCount: 2,
      runlogCounterReset: false,
    });
    t.same(await s.runs.counters('a'), {
      runsRecordedTotal: 5,
      runsRetainedCount: 3,
      runsRolledOverCount: 2,
      runlogCounterReset: false,
    });
    t.same(
      (await s.runs.listForJob('b')).map((r) => [r.seq, r.status, r.trigger]),
      [[6, 'running', 'schedule']],
      'seq comes from the global counter',
    );
    // In-flight runs are never rolled over: with 3 parked runs the ring can grow past its bound.
    for (let i = 1; i <= 4; i++) await s.runs.start({ id: `c${i}`, jobId: 'c', status: 'parked' });
    t.equal((await s.runs.listForJob('c')).length, 4, 'in-flight runs kept');
    t.same(
      (await s.runs.listByStatus()).map((r) => r.id),
      ['b1', 'c1', 'c2', 'c3', 'c4'],
      'resume candidates oldest first',
    );
    await s.runs.update('c1', { status: 'abandoned' });
    await s.runs.start({ id: 'c5', jobId: 'c', status: 'running' });
    t.same(
      (await s.runs.listForJob('c')).map((r) => r.id),
      ['c5', 'c4', 'c3', 'c2'],
      'the finished one rolls over first',
    );
    // Counter wound back (a database restored from an older copy): flagged, rolled-over is a floor.
    const c = await s.runs.counters();
    t.equal(c.runlogCounterReset, false);
    t.equal(c.runsRecordedTotal, 11);
  });

  t.test('updates, transitions, lookups', async (t) => {
    const s = await (await makeTarget(t)).open();
    const r = await s.runs.start({
      id: 'r1',
      jobId: 'j',
      startedAt: '2030-01-01T00:00:00.000Z',
      destinations: { local: { state: 'pending' } },
      detail: { ladder: 0 },
    });
    t.equal(r.status, 'running');
    t.equal(r.prevRunId, null);
    await failsWith(t, s.runs.start({ id: 'r1', jobId: 'j' }), 'ERR_STATE_CONFLICT', 'duplicate run id');
    const u = await s.runs.update('r1', {
      bytes: 5_000_000_000,
      records: 12,
      warnings: 2,
      destinations: { s3: { state: 'verified', bytes: 10 } },
      detail: { archive: 'x' },
    });
    t.equal(u.bytes, 5_000_000_000, 'bytes beyond 32 bits');
    t.same(
      u.destinations,
      { local: { state: 'pending' }, s3: { state: 'verified', bytes: 10 } },
      'destinations merged',
    );
    t.same(u.detail, { ladder: 0, archive: 'x' });
    t.equal(u.finishedAt, null);
    t.equal(
      await s.runs.transition('r1', ['parked'], { status: 'ok' }),
      null,
      'CAS refused from another status',
    );
    const ok = await s.runs.transition('r1', ['running', 'parked'], { status: 'ok', causeDigest: null });
    t.equal(ok?.status, 'ok');
    t.equal(await s.runs.transition('nope', ['running'], { status: 'ok' }), null);
    await failsWith(t, s.runs.update('nope', { status: 'ok' }), 'ERR_STATE_NOT_FOUND', 'update missing run');
    await failsWith(t, s.runs.update('r1', { status: 'weird' as never }), 'ERR_STATE_INVALID', 'bad status');
    await failsWith(t, s.runs.update('r1', { bytes: -1 }), 'ERR_STATE_INVALID', 'negative bytes');
    await s.runs.start({ id: 'r2', jobId: 'j', startedAt: '2030-01-02T00:00:00.000Z', prevRunId: 'r1' });
    await s.runs.update('r2', { status: 'failed', reason: 'run failed', causeDigest: 'abc' });
    await s.runs.start({ id: 'r3', jobId: 'j', startedAt: '2030-01-03T00:00:00.000Z', prevRunId: 'r2' });
    await s.runs.update('r3', { status: 'ok', prunedAt: '2030-02-01T00:00:00.000Z' });
    t.equal((await s.runs.latestOk('j'))?.id, 'r3');
    t.equal((await s.runs.latestOk('j', '2030-01-02T12:00:00.000Z'))?.id, 'r1', 'latest ok at or before T');
    t.equal(await s.runs.latestOk('j', '2029-12-31T00:00:00.000Z'), null);
    t.same(await s.runs.window('j'), {
      oldest: '2030-01-01T00:00:00.000Z',
      newest: '2030-01-03T00:00:00.000Z',
      count: 3,
    });
    t.equal(await s.runs.window('none'), null);
    t.equal((await s.runs.get('r3'))?.prunedAt, '2030-02-01T00:00:00.000Z');
    t.equal((await s.runs.get('r2'))?.causeDigest, 'abc');
  });

  t.test('checkpoints', async (t) => {
    const s = await (await makeTarget(t)).open();
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 7) % 256);
    await s.checkpoints.put('r', 'j', bytes);
    const got = await s.checkpoints.get('r');
    t.same(Buffer.from(got?.sealed ?? []), Buffer.from(bytes), 'bytes round-trip');
    t.equal(got?.jobId, 'j');
    await s.checkpoints.put('r', 'j', bytes.subarray(10, 20));
    t.same(
      Buffer.from((await s.checkpoints.get('r'))?.sealed ?? []),
      Buffer.from(bytes.subarray(10, 20)),
      'replaced',
    );
    t.equal(await s.checkpoints.delete('r'), true);
    t.equal(await s.checkpoints.delete('r'), false);
    t.equal(await s.checkpoints.get('r'), null);
  });

  t.test('restoring a job and its history ring (control-plane restore)', async (t) => {
    const src = await (await makeTarget(t)).open();
    await src.jobs.upsert({ id: 'j', cadenceSeconds: 3600 });
    await src.jobs.upsert({ id: 'j', cadenceSeconds: 7200 });
    for (let i = 1; i <= 3; i++) {
      const prev = await src.runs.latestOk('j');
      await src.runs.start({ id: `r${i}`, jobId: 'j', prevRunId: prev?.id ?? null });
      await src.runs.update(`r${i}`, { status: i === 2 ? 'failed' : 'ok', bytes: 10 * i });
    }
    await src.runs.start({ id: 'live', jobId: 'j' });
    const job = (await src.jobs.get('j'))!;
    const runs = (await src.runs.listForJob('j')).filter((r) => r.status !== 'running').reverse();

    const dst = await (await makeTarget(t)).open();
    const restored = await dst.jobs.restore(job.config, job.configRev);
    t.equal(restored.configRev, 2, 'the revision carries over');
    await failsWith(t, dst.jobs.restore(job.config, 2), 'ERR_STATE_CONFLICT', 'never over a live job');
    await failsWith(t, dst.jobs.restore(job.config, 0), 'ERR_STATE_INVALID', 'a revision is positive');
    t.equal(
      (await dst.jobs.upsert({ ...job.config, cadenceSeconds: 60 })).job.configRev,
      3,
      'numbering continues',
    );

    const r = await dst.runs.restoreRing('j', { runs, recordedTotal: 4, rolledOver: 0, recordedFloor: 4 });
    t.same(r, { inserted: 3, skipped: 0 });
    t.same(
      await dst.runs.restoreRing('j', { runs, recordedTotal: 4, rolledOver: 0 }),
      { inserted: 0, skipped: 3 },
      'idempotent',
    );
    const back = await dst.runs.listForJob('j');
    t.same(
      back.map((x) => [x.id, x.seq, x.prevRunId, x.bytes]),
      runs.reverse().map((x) => [x.id, x.seq, x.prevRunId, x.bytes]),
    );
    t.equal((await dst.runs.latestOk('j'))?.id, 'r3');
    const next = await dst.runs.start({ id: 'r5', jobId: 'j', prevRunId: 'r3' });
    t.equal(next.seq, 5, 'the next run takes the seq after the exported counter');
    t.match(await dst.runs.counters('j'), { runsRecordedTotal: 5, runlogCounterReset: false });
    const live = (await src.runs.get('live'))!;
    await failsWith(
      t,
      dst.runs.restoreRing('j', { runs: [live], recordedTotal: 0, rolledOver: 0 }),
      'ERR_STATE_INVALID',
      'no run in flight',
    );
    await failsWith(
      t,
      dst.runs.restoreRing('k', { runs, recordedTotal: 0, rolledOver: 0 }),
      'ERR_STATE_INVALID',
      'no run of another job',
    );
  });
}
