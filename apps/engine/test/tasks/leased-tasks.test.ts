// LeasedTasks against a real SQLite state file: one holder at a time, fencing at the commit point,
// abort on a lost lease, the live map, and graceful stop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isStateError, openState, type State } from '@coffer/state';
import t, { type Test } from 'tap';
import { LeasedTasks } from '../../src/tasks/leased-tasks.ts';

async function world(t: Test): Promise<State> {
  const dir = mkdtempSync(join(tmpdir(), 'leased-tasks-'));
  const state = await openState({ dataDir: dir });
  t.teardown(async () => {
    await state.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return state;
}

const gate = () => {
  let open!: () => void;
  const p = new Promise<void>((r) => {
    open = r;
  });
  return { p, open };
};

t.test('one holder at a time; the lease is released when the task ends', async (t) => {
  const state = await world(t);
  const a = new LeasedTasks({ leases: state.leases, holder: 'a', ttlMs: 60_000 });
  const b = new LeasedTasks({ leases: state.leases, holder: 'b', ttlMs: 60_000 });
  const g = gate();
  const ha = await a.run('job1', 'run:job1', async () => {
    await g.p;
    return 7;
  });
  t.ok(ha, 'a takes the lease');
  t.equal(a.size, 1);
  t.ok(a.has('job1'));
  t.same(a.keys(), ['job1']);
  t.equal(await b.run('job1', 'run:job1', async () => 1), null, 'b is refused while a holds it');
  t.equal(
    await a.run('job1', 'run:job1', async () => 1),
    null,
    'the same key twice in one process is refused',
  );
  g.open();
  t.equal(await ha!.done, 7, 'done carries the value');
  t.equal(a.size, 0, 'gone from the live map');
  t.equal(await state.leases.get('run:job1'), null, 'lease released');
  const hb = await b.run('job1', 'run:job1', async () => 'b');
  t.equal(await hb!.done, 'b', 'b takes it once a is done');
});

t.test('a task taken over is aborted and fails its commit point', async (t) => {
  const state = await world(t);
  const lost: string[] = [];
  const a = new LeasedTasks({
    leases: state.leases,
    holder: 'a',
    ttlMs: 300,
    renewEveryMs: 60_000, // no renewal: the lease expires and is taken over
    onLost: (key) => lost.push(key),
  });
  const result: { aborted?: boolean; lost?: boolean; code?: string } = {};
  const g = gate();
  const h = await a.run('x', 'restore-apply:x', async (ctx) => {
    await g.p;
    try {
      await ctx.lease.assertHeld();
    } catch (e) {
      result.code = isStateError(e, 'ERR_STATE_LEASE_LOST') ? 'ERR_STATE_LEASE_LOST' : String(e);
    }
    result.aborted = ctx.signal.aborted;
    result.lost = ctx.lost;
    return 'ended';
  });
  await new Promise((r) => setTimeout(r, 400));
  const taken = await state.leases.acquire('restore-apply:x', 'b', 60_000);
  t.ok(taken, 'b takes the expired lease over');
  t.ok(taken!.fence > h!.fence, 'with a higher fencing token');
  g.open();
  t.equal(await h!.done, 'ended');
  t.same(result, { code: 'ERR_STATE_LEASE_LOST', aborted: true, lost: true });
  t.same(lost, ['x'], 'onLost called once');
  const now = await state.leases.get('restore-apply:x');
  t.equal(now?.holder, 'b', "a's release did not remove b's lease");
});

t.test('renewal keeps a long task alive past its TTL', async (t) => {
  const state = await world(t);
  const a = new LeasedTasks({ leases: state.leases, holder: 'a', ttlMs: 300, renewEveryMs: 50 });
  const h = await a.run('k', 'drill.session', async (ctx) => {
    await new Promise((r) => setTimeout(r, 900));
    await ctx.lease.assertHeld();
    return ctx.lost;
  });
  t.equal(await h!.done, false, 'still held after three TTLs');
});

t.test('stop aborts live tasks with stopping set and waits for them', async (t) => {
  const state = await world(t);
  const errors: unknown[] = [];
  const a = new LeasedTasks({
    leases: state.leases,
    holder: 'a',
    ttlMs: 60_000,
    onError: (_k, e) => errors.push(e),
  });
  const seen: { stopping?: boolean; aborted?: boolean } = {};
  const h = await a.run('k', 'run:k', async (ctx) => {
    await new Promise<void>((r) => ctx.signal.addEventListener('abort', () => r()));
    seen.stopping = ctx.stopping;
    seen.aborted = ctx.signal.aborted;
    await new Promise((r) => setTimeout(r, 50)); // saving a checkpoint
    return 'saved';
  });
  const failing = await a.run('f', 'run:f', async () => {
    throw new Error('boom');
  });
  t.equal(await failing!.done, undefined, 'a task that throws settles with undefined');
  t.equal((errors[0] as Error).message, 'boom', 'its error goes to onError');
  await a.stop();
  t.same(seen, { stopping: true, aborted: true });
  t.equal(await h!.done, 'saved');
  t.equal(a.size, 0);
  t.equal(await state.leases.get('run:k'), null, 'released after the task returned');
  t.equal(await a.run('k2', 'run:k2', async () => 1), null, 'no new task after stop');
  a.resume();
  t.ok(await a.run('k3', 'run:k3', async () => 1), 'resume allows new tasks');
  await a.idle();
});

t.test('adopt runs under a lease acquired by the caller; a duplicate key is a caller bug', async (t) => {
  const state = await world(t);
  const a = new LeasedTasks({ leases: state.leases, holder: 'a', ttlMs: 60_000 });
  const lease = await a.acquire('run:j');
  t.ok(lease);
  const g = gate();
  const h = a.adopt('j', lease!, async () => g.p);
  t.throws(() => a.adopt('j', lease!, async () => undefined), /already running/);
  g.open();
  await h.done;
  const other = await a.acquire('run:other');
  await a.release(other!);
  t.equal(await state.leases.get('run:other'), null, 'release gives back an unused lease');
});
