/**
 * Property: whatever the sequence of ok and failed runs, state-database losses, restores in
 * progress (retention pins) and retention settings, retention never leaves a job without its latest
 * verified run, never deletes a pinned run, and always keeps the newest `keepLast` runs.
 *
 * Each trial drives the real run service and the real retention code against a real SQLite state
 * store and a real destination (filesystem; one trial on the loopback S3 server), with a seeded
 * PRNG. The history ring is shrunk to 6 runs so that rolling the latest ok run out of it takes a
 * few failed runs instead of 50. A failing trial prints its seed: replay it with
 * `RETENTION_SEED=<seed>`.
 */
import { randomInt } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns, readRunManifest, verifyRun } from '@coffer/archive';
import { generateRecipient, generateSigner } from '@coffer/crypto';
import { createFsStore, createS3Store, type ObjectStore } from '@coffer/objectstore';
import { openState, type State } from '@coffer/state';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { acquirePin, pinId, releasePin } from '../../src/runs/pins.ts';
import { createRunService, type RunService } from '../../src/runs/service.ts';

const HOUR = 3_600_000;
const SEED = process.env.RETENTION_SEED ? Number(process.env.RETENTION_SEED) : randomInt(2 ** 31);
const TRIALS = 6;
const STEPS = 18;
t.comment(`retention property seed ${SEED} (replay with RETENTION_SEED=${SEED})`);

/** mulberry32: small, fast, good enough to pick actions. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a trial needs of its tap test. */
interface T {
  teardown(fn: () => void | Promise<void>): void;
  same(found: unknown, wanted: unknown, message: string): unknown;
}

interface Engine {
  state: State;
  service: RunService;
}

interface Retention {
  keepLast?: number;
  keepDays?: number;
}

async function trial(t: T, n: number, store: ObjectStore, rnd: () => number): Promise<number> {
  const where = `seed ${SEED} trial ${n}`;
  const dir = tempDir(t, 'coffer-retention-prop-');
  const source = join(dir, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'a.txt'), 'alpha\n');
  const keys = {
    signer: generateSigner(),
    operational: generateRecipient(),
    breakGlass: { publicKey: generateRecipient().publicKey },
  };
  const clock = { now: new Date() };
  const pick = <X>(xs: X[]): X => xs[Math.floor(rnd() * xs.length)]!;
  const randomRetention = (): Retention => {
    const r: Retention = {};
    if (rnd() < 0.7) r.keepLast = 1 + Math.floor(rnd() * 3);
    if (rnd() < 0.6 || r.keepLast === undefined) r.keepDays = 1 + Math.floor(rnd() * 2);
    return r;
  };
  let retention = randomRetention();
  let generation = 0;
  const open = async (): Promise<Engine> => {
    const data = join(dir, `state-${generation++}`);
    const state = await openState({ dataDir: data, now: () => clock.now, historyLimit: 6 });
    const service = createRunService({
      state,
      keys,
      destinations: new Map([['default', store]]),
      log: { info() {}, warn() {}, error() {} },
      dataDir: data,
      now: () => clock.now,
      executor: { checkpointIntervalMs: 0, workers: 0 },
    });
    return { state, service };
  };
  const close = async (e: Engine) => {
    await e.service.stop();
    await e.state.close();
  };
  // Whether the job's source is readable (its next run ends ok), as last stored.
  let sourceOk = true;
  const setJob = (e: Engine, ok: boolean) => {
    sourceOk = ok;
    return e.state.jobs.upsert({
      id: 'docs',
      cadenceSeconds: 3600,
      source: { type: 'files', path: ok ? source : join(dir, 'missing') },
      destinations: ['default'],
      retention,
    } as unknown as { id: string });
  };

  let e = await open();
  t.teardown(() => close(e));
  // The ground truth, in creation order: which runs really ended ok.
  const truth: { id: string; ok: boolean }[] = [];
  // Pin id -> the pinned run and when the pin lapses (a holder that never releases).
  const pins = new Map<string, { runId: string; expiresAt: number }>();
  const violations: string[] = [];
  let pruned = 0;
  const log: string[] = [];

  const check = async (step: number, before: string[]) => {
    const listed = new Set((await listRuns(store, 'docs')).map((r) => r.runId));
    const latestOk = truth.filter((r) => r.ok).at(-1);
    if (latestOk) {
      if (!listed.has(latestOk.id)) violations.push(`step ${step}: latest ok run ${latestOk.id} was deleted`);
      else
        await readRunManifest(store, {
          job: 'docs',
          runId: latestOk.id,
          signerPublicKey: keys.signer.publicKey,
        }).catch((err) => violations.push(`step ${step}: latest ok run does not verify (${err.code})`));
    }
    for (const [id, pin] of pins) {
      if (pin.expiresAt <= clock.now.getTime()) pins.delete(id);
      else if (!listed.has(pin.runId))
        violations.push(`step ${step}: pinned run ${pin.runId} (${id}) was deleted`);
    }
    if (retention.keepLast !== undefined) {
      const order = truth.map((r) => r.id).filter((id) => before.includes(id));
      for (const id of order.slice(-retention.keepLast))
        if (!listed.has(id)) violations.push(`step ${step}: ${id} is within keepLast ${retention.keepLast}`);
    }
    pruned += before.filter((id) => !listed.has(id)).length;
  };

  const prune = async (step: number) => {
    const before = (await listRuns(store, 'docs')).map((r) => r.runId);
    await e.service.pruneAll();
    await check(step, before);
  };

  for (let step = 0; step < STEPS; step++) {
    const x = rnd();
    if (x < 0.3 || x >= 0.92) {
      const ok = x < 0.3;
      await setJob(e, ok);
      clock.now = new Date(clock.now.getTime() + 60_000);
      const r = await e.service.trigger('docs');
      if (r.kind !== 'started') throw new Error(`${where}: trigger ${r.kind}`);
      await e.service.idle();
      const rec = await e.state.runs.get(r.runId);
      truth.push({ id: r.runId, ok: rec?.status === 'ok' });
      if ((rec?.status === 'ok') !== ok) violations.push(`step ${step}: run ended ${rec?.status}`);
      log.push(ok ? 'ok' : 'fail');
    } else if (x < 0.42) {
      // A streak of failures: enough to roll every ok run out of the 6-run ring.
      await setJob(e, false);
      const k = 3 + Math.floor(rnd() * 6);
      for (let i = 0; i < k; i++) {
        clock.now = new Date(clock.now.getTime() + 60_000);
        const r = await e.service.trigger('docs');
        if (r.kind !== 'started') throw new Error(`${where}: trigger ${r.kind}`);
        await e.service.idle();
        truth.push({ id: r.runId, ok: false });
      }
      log.push(`fail*${k}`);
    } else if (x < 0.55) {
      const ms = Math.floor(rnd() * 3 * 24 * HOUR);
      clock.now = new Date(clock.now.getTime() + ms);
      log.push(`+${Math.round(ms / HOUR)}h`);
    } else if (x < 0.7) {
      await prune(step);
      log.push('prune');
    } else if (x < 0.76) {
      // State loss: a fresh database on the same destination (pins lived in the lost one).
      await close(e);
      e = await open();
      pins.clear();
      log.push('state-loss');
    } else if (x < 0.84) {
      const sealed = (await listRuns(store, 'docs')).map((r) => r.runId);
      if (sealed.length > 0) {
        const runId = pick(sealed);
        const id = rnd() < 0.5 ? pinId.apply(`rap_${n}_${step}`) : pinId.approval(`rst_${n}_${step}`);
        const pin = await acquirePin(e.state.settings, {
          id,
          purpose: id.startsWith('apply') ? 'restore-apply' : 'restore-approval',
          job: 'docs',
          runId,
          now: clock.now,
        });
        pins.set(id, { runId, expiresAt: Date.parse(pin.expiresAt) });
        log.push(`pin ${runId.slice(-8)}`);
      }
    } else if (x < 0.88) {
      if (pins.size > 0) {
        const id = pick([...pins.keys()]);
        await releasePin(e.state.settings, id);
        pins.delete(id);
        log.push('unpin');
      }
    } else {
      // The operator changes the job's retention: stored at once, as the API does, so the next
      // prune applies it (the checks above judge every prune by `retention`). The job is stored
      // only once it exists in this state database (after a state loss: at its next run).
      retention = randomRetention();
      if ((await e.state.jobs.get('docs')) !== null) await setJob(e, sourceOk);
      log.push(`retention ${JSON.stringify(retention)}`);
    }
  }
  await setJob(e, true);
  clock.now = new Date(clock.now.getTime() + 10 * 24 * HOUR);
  await prune(STEPS);
  // The latest ok run does not only verify its signature: it reads back whole.
  const latestOk = truth.filter((r) => r.ok).at(-1);
  if (latestOk) {
    const v = await verifyRun(store, {
      job: 'docs',
      runId: latestOk.id,
      secretKey: keys.operational.secretKey,
      signerPublicKey: keys.signer.publicKey,
    });
    if (!v.ok) violations.push(`end: latest ok run does not read back (${v.failure?.code})`);
  }
  t.same(violations, [], `${where}: retention ${JSON.stringify(retention)}; steps ${log.join(', ')}`);
  return pruned;
}

t.test('retention never leaves a job without its latest verified run (filesystem)', async (t) => {
  const rnd = prng(SEED);
  let pruned = 0;
  for (let n = 0; n < TRIALS; n++) {
    const root = tempDir(t, 'coffer-retention-prop-dest-');
    pruned += await trial(t, n, createFsStore({ root }), rnd);
  }
  t.ok(pruned > 0, `retention pruned ${pruned} run(s) over the trials (the property is not vacuous)`);
});

t.test('retention never leaves a job without its latest verified run (S3)', async (t) => {
  const rnd = prng(SEED ^ 0x5eed);
  const b = await createTestBucket('retention-prop');
  const store = createS3Store({
    bucket: b.bucket,
    prefix: 'dest',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });
  await trial(t, 0, store, rnd);
});
