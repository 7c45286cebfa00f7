// Run outcomes raise their events through a real engine (real SQLite, real files source, real
// run machinery, faults injected through the test-fault routes): one `run-succeeded` per ok run,
// one `run-failed` with its closed-list reason, one `run-parked` with its retry time, none for an
// interrupted run; a resumed run past its strike budget is `run-abandoned`; a throwing subscriber
// breaks neither the route nor the run.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { openJobSource, type RunJob, type RunSource } from '../../src/runs/index.ts';
import { FAILURE_REASONS } from '../../src/runs/reasons.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { writeTree } from '../runs/helpers/world.ts';
import { collect, delivered } from './helpers.ts';

type T = Parameters<typeof startEngine>[0];

async function engine(t: T, options: Parameters<typeof startEngine>[2] = {}) {
  const root = tempDir(t, 'coffer-events-runs-');
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha', 'b/c.txt': 'charlie' });
  const e = await startEngine(
    t,
    { ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'), HARNESS_TEST_FAULTS: '1' },
    { rateLimit: { max: 1000, windowSeconds: 60 }, ...options },
  );
  const post = (path: string, body: unknown = {}) =>
    http(`${e.url}/admin${path}`, { headers: bearer(), body });
  const job = { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: source } };
  const upsert = await post('/jobs', job);
  if (upsert.status !== 200) throw new Error(`job upsert: ${upsert.text}`);
  const run = async () => {
    const r = await post('/trigger', { id: 'docs' });
    if (r.status !== 200) throw new Error(`trigger: ${r.text}`);
    await e.app.runs.idle();
    await delivered();
    return r.json().runId as string;
  };
  return { ...e, post, run, source };
}

t.test('one event per settled run: succeeded, failed (closed-list reason), parked', async (t) => {
  const e = await engine(t);
  const c = collect(e.app);
  const ok1 = await e.run();
  const ok2 = await e.run();
  t.same(
    c.all.map((x) => [x.name, x.jobId, x.detail.runId]),
    [
      ['run-succeeded', 'docs', ok1],
      ['run-succeeded', 'docs', ok2],
    ],
    'exactly one run-succeeded per ok run',
  );
  const run1 = await e.app.state.runs.get(ok1);
  t.same(c.all[0]?.detail, {
    runId: ok1,
    records: run1!.records,
    bytes: run1!.bytes,
    warnings: 0,
    unchanged: false,
    unchangedFrom: null,
  });
  t.match(c.all[0]?.at, /Z$/);

  t.equal(
    (await e.post('/test-fault/arm', { target: 'destination', fault: 'access-denied', times: 0 })).status,
    200,
  );
  const failed = await e.run();
  const f = c.named('run-failed');
  t.equal(f.length, 1, 'one run-failed');
  const stored = await e.app.state.runs.get(failed);
  t.same(f[0]?.detail, {
    runId: failed,
    reason: 'destination access error',
    code: (stored!.detail as { code: string }).code,
    causeDigest: stored!.causeDigest,
  });
  t.ok((FAILURE_REASONS as readonly string[]).includes(String(f[0]?.detail.reason)), 'a closed-list reason');
  t.match(f[0]?.detail.causeDigest, /^[0-9a-f]{12}$/);

  await e.post('/test-fault/disarm');
  await e.post('/test-fault/arm', { target: 'destination', fault: 'throttle', times: 1 });
  const parked = await e.run();
  const p = c.named('run-parked');
  t.equal(p.length, 1, 'one run-parked');
  t.match(p[0], {
    jobId: 'docs',
    detail: { runId: parked, parks: 1, retryAt: /Z$/, causeDigest: /^[0-9a-f]{12}$/ },
  });
  t.equal(p[0]?.detail.retryAt, (await e.app.state.runs.get(parked))!.detail.retryAt);
  t.equal(c.all.length, 4, 'nothing else was raised');
});

t.test(
  'an interrupted run raises nothing; abandoned past its strike budget raises run-abandoned',
  async (t) => {
    // A source whose reads wait for a gate: the run is surely in flight when the service stops.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let gated = true;
    const openSource = async (job: RunJob): Promise<RunSource> => {
      const s = await openJobSource(job.source, job.id);
      return {
        type: s.type,
        binding: s.binding,
        namespace: s.namespace,
        description: s.description,
        enumerate: (o) => s.enumerate(o),
        async read(name, o) {
          if (gated) await gate;
          return s.read(name, o);
        },
        close: () => s.close(),
      };
    };
    const e = await engine(t, { runs: { openSource, strikeBudget: 1 } });
    const c = collect(e.app);
    const r = await e.post('/trigger', { id: 'docs' });
    t.equal(r.status, 200, r.text);
    const runId = r.json().runId as string;
    const stopping = e.app.runs.stop();
    setTimeout(() => release(), 50);
    await stopping;
    await delivered();
    const run = await e.app.state.runs.get(runId);
    t.equal(run?.status, 'running', 'left running (resumable)');
    t.equal((run?.detail as { interrupted?: string } | undefined)?.interrupted, 'shutdown');
    t.same(c.all, [], 'an interrupted run raises nothing');

    // Mark the run as cut short by a crash (not a clean stop): its resume is a strike, and with a
    // budget of one it is abandoned at the next tick.
    await e.app.state.runs.update(runId, { detail: { interrupted: null } });
    gated = false;
    e.app.runs.start(); // its first tick resumes (here: abandons) what the stop left
    await c.waitFor((x) => x.name === 'run-abandoned');
    await e.app.runs.tick('test');
    await e.app.runs.idle();
    await delivered();
    const ab = c.named('run-abandoned');
    t.equal(ab.length, 1, 'one run-abandoned');
    t.same(ab[0]?.detail, { runId, reason: 'run failed', why: 'strike budget spent' });
    t.equal((await e.app.state.runs.get(runId))?.status, 'abandoned');
  },
);

t.test('a throwing subscriber breaks neither the route nor the run', async (t) => {
  const e = await engine(t);
  e.app.events.subscribe(() => {
    throw new Error('subscriber down');
  });
  e.app.events.subscribe(async () => {
    throw new Error('async subscriber down');
  });
  const c = collect(e.app);
  const runId = await e.run();
  t.equal((await e.app.state.runs.get(runId))?.status, 'ok', 'the run settled ok');
  t.equal(c.named('run-succeeded').length, 1, 'the other subscriber still got its event');
  const audit = await http(`${e.url}/admin/audit/verify`, { headers: bearer() });
  t.equal(audit.status, 200, 'routes still answer');
  t.ok(
    e.logs.filter((l) => l.includes('engine-event-subscriber-failed')).length >= 2,
    'each failure is logged',
  );
  t.notOk(e.logs.join('').includes('subscriber down'), 'the messages are not logged');
});
