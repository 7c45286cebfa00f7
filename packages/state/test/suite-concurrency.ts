/** Leases and the audit chain under two writers (two State instances, and two child processes). */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import {
  type AuditHead,
  type AuditRowInput,
  holdLease,
  LEASE_TAKEN,
  LEASE_UNRENEWABLE,
  type State,
} from '../src/index.ts';
import { clock, failsWith, type MakeTarget } from './suite.ts';

export const GENESIS = `sha384:${'0'.repeat(96)}`;

/** The test's own chain rule (the real one is @coffer/audit's): hash over the event with prevHash. */
export function buildRow(
  prev: AuditHead | null,
  action: string,
  body: Record<string, unknown>,
): AuditRowInput {
  const seq = (prev?.seq ?? 0) + 1;
  const prevHash = prev?.hash ?? GENESIS;
  const ts = new Date().toISOString();
  const event = { seq, ts, prevHash, action, ...body };
  const hash = `sha384:${createHash('sha384').update(JSON.stringify(event)).digest('hex')}`;
  return { seq, ts, prevHash, hash, action, actorSubject: (body.subject as string) ?? null, event };
}

/** Checks seq 1..n without gaps and every prevHash/hash link; returns the number of rows. */
export async function verifyChain(t: Test, s: State, expected: number): Promise<void> {
  const rows = await s.audit.query({ order: 'asc', afterSeq: 0, limit: 10000 });
  t.equal(rows.length, expected, `${expected} events`);
  let prev = GENESIS;
  let bad = 0;
  rows.forEach((r, i) => {
    const recomputed = `sha384:${createHash('sha384').update(JSON.stringify(r.event)).digest('hex')}`;
    if (r.seq !== i + 1 || r.prevHash !== prev || r.hash !== recomputed || r.event.prevHash !== prev) bad++;
    prev = r.hash;
  });
  t.equal(bad, 0, 'seq has no gaps and every prevHash chains to the previous hash');
  t.same(await s.audit.head(), { seq: expected, hash: prev }, 'head is the last event');
}

/** Resolves when `signal` aborts (the renewal timer is unref'd: this one keeps the test alive). */
function aborted(signal: AbortSignal, ms = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the lease signal never aborted')), ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export async function leasesSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('exclusive between two instances; expiry hands over with a new fence', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const a = await target.open({ now: c.now });
    const b = await target.open({ now: c.now });
    const la = await a.leases.acquire('run:docs', 'engine-a', 30_000);
    t.equal(la?.holder, 'engine-a');
    t.equal(la?.fence, 1);
    t.equal(await b.leases.acquire('run:docs', 'engine-b', 30_000), null, 'B cannot take a held lease');
    t.equal(
      await b.leases.renew('run:docs', 'engine-b', 30_000),
      null,
      'B cannot renew what it does not hold',
    );
    t.equal(await b.leases.release('run:docs', 'engine-b'), false, 'B cannot release it');
    c.advance(20_000);
    const again = await a.leases.acquire('run:docs', 'engine-a', 30_000);
    t.equal(again?.fence, 2, 'every acquisition is a new fence, also by the same holder');
    t.equal(again?.expiresAt, c.now().getTime() + 30_000, 'and extends it');
    c.advance(29_000);
    t.equal((await a.leases.renew('run:docs', 'engine-a', 30_000))?.holder, 'engine-a', 'renewed in time');
    c.advance(30_001);
    const lb = await b.leases.acquire('run:docs', 'engine-b', 30_000);
    t.equal(lb?.holder, 'engine-b', 'expired lease taken over');
    t.equal(lb?.fence, 3, 'new holder, new fence');
    t.equal(await a.leases.renew('run:docs', 'engine-a', 30_000), null, 'the old holder lost it');
    t.equal(await b.leases.release('run:docs', 'engine-b'), true);
    t.equal(await a.leases.get('run:docs'), null);
    t.equal(
      (await a.leases.acquire('run:docs', 'engine-a', 1000))?.fence,
      4,
      'released: free again, and the fence never goes back (a paused holder of fence 1 stays fenced out)',
    );
    await failsWith(t, a.leases.acquire('x', 'h', 0), 'ERR_STATE_INVALID', 'zero TTL');
  });

  t.test('concurrent acquisition: exactly one winner per round', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const instances = [await target.open({ now: c.now }), await target.open({ now: c.now })];
    let winners = 0;
    for (let round = 0; round < 20; round++) {
      c.advance(10_000); // every earlier lease has expired
      const got = await Promise.all(
        [0, 1, 2, 3].map((i) => (instances[i % 2] as State).leases.acquire('tick', `h${round}-${i}`, 5000)),
      );
      const n = got.filter((l) => l !== null).length;
      if (n === 1) winners++;
    }
    t.equal(winners, 20, 'every round had exactly one holder');
  });

  t.test('fencing: a paused holder’s token is refused once another holder acquired', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const a = await target.open({ now: c.now });
    const b = await target.open({ now: c.now });
    const la = (await a.leases.acquire('run:j', 'engine-a', 3000))!;
    const tokenA = { name: 'run:j', holder: 'engine-a', fence: la.fence };
    await a.runs.start({ id: 'r1', jobId: 'j' });
    t.equal(
      (await a.leases.assertHeld(tokenA, { extendMs: 3000 })).fence,
      la.fence,
      'held: the check passes',
    );
    await a.checkpoints.put('r1', 'j', new Uint8Array([1]), { lease: tokenA });
    c.advance(3001);
    // Expired but not taken: the fence still says nobody acquired it since.
    t.equal((await a.leases.assertHeld(tokenA)).holder, 'engine-a', 'expired, untaken: still ours');
    c.advance(3001);
    const lb = (await b.leases.acquire('run:j', 'engine-b', 3000))!;
    t.ok(lb.fence > la.fence, 'the new holder has a higher fence');
    await failsWith(t, a.leases.assertHeld(tokenA), 'ERR_STATE_LEASE_LOST', 'assertHeld');
    t.equal(await a.leases.renew('run:j', 'engine-a', 3000, la.fence), null, 'fenced renewal refused');
    await failsWith(
      t,
      a.runs.transition('r1', ['running'], { status: 'ok' }, { lease: tokenA }),
      'ERR_STATE_LEASE_LOST',
      'fenced run transition',
    );
    t.equal((await a.runs.get('r1'))?.status, 'running', 'the stale commit changed nothing');
    await failsWith(
      t,
      a.checkpoints.put('r1', 'j', new Uint8Array([9]), { lease: tokenA }),
      'ERR_STATE_LEASE_LOST',
      'fenced checkpoint',
    );
    t.same(
      [...((await a.checkpoints.get('r1'))?.sealed ?? [])],
      [1],
      'the checkpoint is the last fenced one',
    );
    const tokenB = { name: 'run:j', holder: 'engine-b', fence: lb.fence };
    t.equal(
      (await b.runs.transition('r1', ['running'], { status: 'ok' }, { lease: tokenB }))?.status,
      'ok',
      'the holder commits',
    );
    t.equal(await b.leases.release('run:j', 'engine-b', lb.fence), true);
    await failsWith(t, b.leases.assertHeld(tokenB), 'ERR_STATE_LEASE_LOST', 'released: not held');
    // The same holder id acquiring again (an engine restarted on the same data dir) gets a new
    // fence, so the token of its earlier incarnation is refused too.
    const la2 = (await a.leases.acquire('run:j', 'engine-a', 3000))!;
    t.ok(la2.fence > lb.fence);
    await failsWith(t, a.leases.assertHeld(tokenA), 'ERR_STATE_LEASE_LOST', 'an older incarnation');
  });

  t.test('holdLease: the signal aborts when the lease is taken, and assertHeld refuses', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const a = await target.open({ now: c.now });
    const b = await target.open({ now: c.now });
    const lost: string[] = [];
    const held = (await holdLease(a.leases, 'run:h', 'engine-a', {
      ttlMs: 3000,
      renewEveryMs: 20,
      now: () => c.now().getTime(),
      onLost: (r) => lost.push(r),
    }))!;
    t.teardown(() => held.release());
    await held.assertHeld();
    t.equal(held.signal.aborted, false);
    t.equal(await holdLease(b.leases, 'run:h', 'engine-b', { ttlMs: 3000 }), null, 'exclusive');
    // Engine A is "paused": its clock-driven lease runs out while B takes over.
    c.advance(5000);
    const lb = (await b.leases.acquire('run:h', 'engine-b', 3000))!;
    t.ok(lb);
    await aborted(held.signal);
    t.same(lost, [LEASE_TAKEN], 'lost once, with the reason');
    t.equal(held.lostReason, LEASE_TAKEN);
    t.match(held.signal.reason, { code: 'ERR_STATE_LEASE_LOST' });
    await failsWith(t, held.assertHeld(), 'ERR_STATE_LEASE_LOST', 'after the loss');
    t.equal((await b.leases.get('run:h'))?.holder, 'engine-b', 'the new holder keeps it');
  });

  t.test('holdLease: renewals failing past the expiry end the lease', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const a = await target.open({ now: c.now });
    const held = (await holdLease(a.leases, 'run:u', 'engine-a', {
      ttlMs: 3000,
      renewEveryMs: 20,
      now: () => c.now().getTime(),
    }))!;
    await a.close(); // every renewal now fails (ERR_STATE_CLOSED), like an unreachable database
    await new Promise((r) => setTimeout(r, 200));
    t.equal(held.signal.aborted, false, 'not before the known expiry');
    c.advance(3001);
    await aborted(held.signal);
    t.equal(held.lostReason, LEASE_UNRENEWABLE);
    await held.release();
  });
}

function runWriter(url: string | undefined, dataDir: string, count: number, name: string): Promise<number> {
  const script = fileURLToPath(new URL('./fixtures/audit-writer.ts', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify({ url, dataDir, count, name })], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(code) : reject(new Error(`writer ${name} exit ${code}: ${err}`)),
    );
  });
}

export async function auditSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('append, head, queries, invariants', async (t) => {
    const s = await (await makeTarget(t)).open();
    t.equal(await s.audit.head(), null);
    t.equal(await s.audit.earliestSeq(), null);
    const first = await s.audit.append((prev) => buildRow(prev, 'job-write', { subject: 'u1' }));
    t.equal(first.seq, 1);
    t.equal(first.prevHash, GENESIS);
    await s.audit.append((prev) => buildRow(prev, 'job-delete', { subject: 'u2' }));
    await s.audit.append((prev) => buildRow(prev, 'job-write', { subject: 'u2' }));
    await failsWith(
      t,
      s.audit.append((prev) => ({ ...buildRow(prev, 'x', {}), seq: 9 })),
      'ERR_STATE_INVARIANT',
      'a seq that skips is refused',
    );
    await failsWith(
      t,
      s.audit.append((prev) => ({ ...buildRow(prev, 'x', {}), prevHash: GENESIS })),
      'ERR_STATE_INVARIANT',
      'a prevHash that forks is refused',
    );
    await t.rejects(
      s.audit.append(() => {
        throw new Error('builder failed');
      }),
      { message: 'builder failed' },
      "a failing builder aborts the append with the builder's own error",
    );
    t.equal((await s.audit.head())?.seq, 3, 'refused appends left nothing');
    t.equal(await s.audit.earliestSeq(), 1);
    t.same(
      (await s.audit.query()).map((r) => r.seq),
      [3, 2, 1],
      'newest first by default',
    );
    t.same(
      (await s.audit.query({ action: 'job-write' })).map((r) => r.seq),
      [3, 1],
    );
    t.same(
      (await s.audit.query({ actor: 'u2', order: 'asc' })).map((r) => r.seq),
      [2, 3],
    );
    t.same(
      (await s.audit.query({ afterSeq: 1, limit: 1, order: 'asc' })).map((r) => r.seq),
      [2],
    );
    t.same(
      (await s.audit.query({ beforeSeq: 3, limit: 5 })).map((r) => r.seq),
      [2, 1],
    );
    t.equal((await s.audit.get(2))?.action, 'job-delete');
    t.equal(await s.audit.get(99), null);
    await verifyChain(t, s, 3);
  });

  t.test('concurrent appends from two State instances stay one linear chain', async (t) => {
    const target = await makeTarget(t);
    const a = await target.open();
    const b = await target.open();
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 100; i++) {
      writes.push(a.audit.append((prev) => buildRow(prev, 'a', { i })));
      writes.push(b.audit.append((prev) => buildRow(prev, 'b', { i })));
    }
    await Promise.all(writes);
    await verifyChain(t, a, 200);
  });

  t.test('concurrent appends from two engine processes stay one linear chain', async (t) => {
    const target = await makeTarget(t);
    const s = await target.open(); // migrate first so the writers race on appends, not on schema
    await Promise.all([
      runWriter(target.options.url, target.options.dataDir, 200, 'p1'),
      runWriter(target.options.url, target.options.dataDir, 200, 'p2'),
    ]);
    await verifyChain(t, s, 400);
    const byWriter = await Promise.all(['p1', 'p2'].map((w) => s.audit.query({ action: w, limit: 1000 })));
    t.same(
      byWriter.map((r) => r.length),
      [200, 200],
      'each process appended all of its events',
    );
  });
}

export async function rateLimitsSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('two instances count against one window; it resets when over; prune', async (t) => {
    const target = await makeTarget(t);
    const c = clock();
    const a = await target.open({ now: c.now });
    const b = await target.open({ now: c.now });
    const hits = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).rateLimits.hit('admin-token', 60_000)),
    );
    t.same(
      hits.map((h) => h.count).sort((x, y) => x - y),
      Array.from({ length: 40 }, (_, i) => i + 1),
      'every hit from either instance got its own count: one shared counter',
    );
    t.equal(hits[0]!.resetInMs, 60_000);
    c.advance(20_000);
    t.same(await b.rateLimits.read('admin-token', 60_000), { count: 40, resetInMs: 40_000 }, 'read');
    t.same(await a.rateLimits.read('other', 60_000), { count: 0, resetInMs: 0 }, 'another caller');
    t.equal((await a.rateLimits.read('admin-token', 60_000)).count, 40, 'read does not count');
    c.advance(40_000);
    t.same(await a.rateLimits.hit('admin-token', 60_000), { count: 1, resetInMs: 60_000 }, 'a new window');
    await a.rateLimits.hit('old', 1000);
    c.advance(120_001);
    await a.rateLimits.hit('fresh', 1000);
    t.equal(await a.rateLimits.prune(120_000), 2, 'windows started long ago are dropped');
    t.equal((await a.rateLimits.read('fresh', 1000)).count, 1, 'a recent one stays');
    await failsWith(t, a.rateLimits.hit('', 1000), 'ERR_STATE_INVALID', 'empty key');
    await failsWith(t, a.rateLimits.hit('k', 0), 'ERR_STATE_INVALID', 'zero window');
  });
}
