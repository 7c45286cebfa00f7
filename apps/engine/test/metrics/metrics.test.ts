/**
 * `GET /metrics` on a real engine with runs recorded in the real state store, parsed by a real
 * Prometheus text-format parser (the `parse-prometheus-text-format` npm package): every series
 * family, its type, labels and values; two engines in one process never share a registry.
 */
import { createRequire } from 'node:module';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';

type Family = {
  name: string;
  help: string;
  type: string;
  metrics: Array<{
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }>;
};
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

const admin = bearer();

t.test('metrics exposition', async (t) => {
  const e = await startEngine(t);
  const state = e.app.state;
  for (const id of ['alpha', 'beta']) {
    await http(`${e.url}/admin/jobs`, {
      headers: admin,
      body: { id, cadenceSeconds: 3600, source: { type: 'files', path: '/srv' } },
    });
  }
  const t0 = Date.now() - 3_600_000;
  const at = (s: number) => new Date(t0 + s * 1000).toISOString();
  await state.runs.start({
    id: 'r1',
    jobId: 'alpha',
    startedAt: at(0),
    destinations: { default: { state: 'pending' } },
  });
  await state.runs.update('r1', {
    status: 'ok',
    finishedAt: at(30),
    bytes: 1000,
    destinations: { default: { state: 'verified' } },
  });
  await state.runs.start({ id: 'r2', jobId: 'alpha', startedAt: at(100) });
  await state.runs.update('r2', { status: 'ok', finishedAt: at(110), bytes: 500 });
  await state.runs.start({
    id: 'r3',
    jobId: 'beta',
    startedAt: at(200),
    destinations: { default: { state: 'pending' } },
  });
  await state.runs.update('r3', {
    status: 'failed',
    reason: 'destination access error',
    finishedAt: at(2200),
    destinations: { default: { state: 'failed' } },
  });
  await state.runs.start({ id: 'r4', jobId: 'beta', startedAt: at(3000) });

  const cred = (
    await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'metrics' } })
  ).json().credential;
  const r = await http(`${e.url}/metrics`, { headers: { authorization: `Bearer ${cred}` } });
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  t.equal(r.headers.get('cache-control'), 'no-store');
  t.equal(r.headers.get('access-control-allow-origin'), null);
  const families = new Map(parse(r.text).map((f) => [f.name, f]));
  const one = (name: string, labels: Record<string, string> = {}) => {
    const fam = families.get(name);
    const m = fam?.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
    return m?.value === undefined ? undefined : Number(m.value);
  };
  t.equal(families.get('coffer_engine_info')?.type, 'GAUGE');
  t.equal(one('coffer_jobs', { state: 'enabled' }), 2);
  t.equal(one('coffer_runs', { status: 'ok' }), 2);
  t.equal(one('coffer_runs', { status: 'failed' }), 1);
  t.equal(one('coffer_runs', { status: 'running' }), 1);
  t.equal(one('coffer_runs', { status: 'abandoned' }), 0, 'every status is present');
  t.equal(families.get('coffer_runs_recorded_total')?.type, 'COUNTER');
  t.equal(one('coffer_runs_recorded_total'), 4);
  const hist = families.get('coffer_run_duration_seconds');
  t.equal(hist?.type, 'HISTOGRAM');
  const ok = hist?.metrics[0];
  t.same([Number(ok?.count), Number(ok?.sum)], [2, 40]);
  t.equal(Number(ok?.buckets?.['15']), 1, '10 s run in the 15 s bucket');
  t.equal(Number(ok?.buckets?.['60']), 2);
  t.equal(one('coffer_bytes_sealed', { job: 'alpha' }), 1500);
  t.equal(one('coffer_bytes_sealed', { job: 'beta' }), 0);
  const age = one('coffer_last_success_age_seconds', { job: 'alpha' })!;
  t.ok(age >= 3600 - 110 - 5 && age < 3600, `age ${age}`);
  t.equal(one('coffer_last_success_age_seconds', { job: 'beta' }), undefined, 'absent until a success');
  t.equal(
    one('coffer_destination_state', { destination: 'default', kind: 'fs', state: 'failed' }),
    1,
    'latest state wins',
  );
  const head = one('coffer_audit_head_seq')!;
  t.ok(head >= 4, 'audit head seq reported');
  t.equal(one('coffer_notification_deliveries', { outcome: 'accepted' }), 0);
  t.equal(one('coffer_notification_deliveries', { outcome: 'refused' }), 0);
  t.notMatch(r.text, /\/srv|test-admin-token|dps_/, 'no paths or secrets in labels');

  // Scraping again gives the same set (no duplicated series from the previous scrape).
  const again = parse(
    (await http(`${e.url}/metrics`, { headers: { authorization: `Bearer ${cred}` } })).text,
  );
  t.equal(again.find((f) => f.name === 'coffer_runs')?.metrics.length, 5);
  t.equal(Number(again.find((f) => f.name === 'coffer_run_duration_seconds')?.metrics[0]?.count), 2);

  // A second engine in this process has its own registry.
  const other = await startEngine(t);
  const cred2 = (
    await http(`${other.url}/admin/support/credentials`, { headers: admin, body: { scope: 'metrics' } })
  ).json().credential;
  const text2 = (await http(`${other.url}/metrics`, { headers: { authorization: `Bearer ${cred2}` } })).text;
  const fams2 = new Map(parse(text2).map((f) => [f.name, f]));
  t.equal(Number(fams2.get('coffer_jobs')?.metrics.find((m) => m.labels?.state === 'enabled')?.value), 0);
});
