import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from './helpers/perimeter.ts';
import { makePki } from './helpers/tls.ts';

const MINIMAL = { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: '/some/dir' } };

t.test('jobs: upsert, list, ifMatchRev table, delete', async (t) => {
  const { url } = await startEngine(t);
  const post = (path: string, body: unknown) => http(`${url}/admin${path}`, { headers: bearer(), body });

  const created = await post('/jobs', MINIMAL);
  t.equal(created.status, 200, created.text);
  t.match(created.json(), { ok: true, id: 'docs', configRev: 1, created: true });

  const list = await http(`${url}/admin/jobs`, { headers: bearer() });
  t.equal(list.status, 200);
  const [row] = list.json().jobs;
  t.match(row, {
    id: 'docs',
    configRev: 1,
    cadenceSeconds: 3600,
    enabled: true,
    destinations: ['default'],
    restoreTestCadenceSeconds: null,
    source: { type: 'files', path: '/some/dir' },
    state: { paused: false },
  });

  // key absent: applied with no base check
  t.equal((await post('/jobs', { ...MINIMAL, cadenceSeconds: 7200 })).json().configRev, 2);
  // integer N equal to the stored revision: applied
  t.equal((await post('/jobs', { ...MINIMAL, cadenceSeconds: 900, ifMatchRev: 2 })).json().configRev, 3);
  // integer N that moved: base-moved, naming fields never values
  const moved = await post('/jobs', { ...MINIMAL, cadenceSeconds: 60, enabled: false, ifMatchRev: 2 });
  t.equal(moved.status, 409);
  const mb = moved.json();
  t.equal(mb.refusal, 'precondition-failed');
  t.type(mb.error, 'string');
  t.same(Object.keys(mb.precondition).sort(), [
    'changedAt',
    'changedFields',
    'currentRev',
    'id',
    'reason',
    'yourRev',
  ]);
  t.match(mb.precondition, { reason: 'base-moved', id: 'docs', yourRev: 2, currentRev: 3 });
  t.ok(Array.isArray(mb.precondition.changedFields));
  t.notMatch(JSON.stringify(mb.precondition.changedFields), /900|3600|\/some\/dir/, 'names, never values');
  // null: believed not to exist
  const exists = await post('/jobs', { ...MINIMAL, ifMatchRev: null });
  t.equal(exists.status, 409);
  t.equal(exists.json().precondition.reason, 'already-exists');
  t.equal(exists.json().precondition.yourRev, null);
  const fresh = await post('/jobs', { ...MINIMAL, id: 'fresh', ifMatchRev: null });
  t.equal(fresh.status, 200);
  t.equal(fresh.json().configRev, 1);

  // delete
  const nullDelete = await post('/jobs/delete', { id: 'docs', ifMatchRev: null });
  t.equal(nullDelete.status, 409, 'null is refused on delete');
  const staleDelete = await post('/jobs/delete', { id: 'docs', ifMatchRev: 1 });
  t.equal(staleDelete.status, 409);
  t.equal(staleDelete.json().precondition.reason, 'base-moved');
  const deleted = await post('/jobs/delete', { id: 'docs', ifMatchRev: 3 });
  t.equal(deleted.status, 200, deleted.text);
  t.same(deleted.json(), { ok: true, id: 'docs', deletedRev: 3 });
  const again = await post('/jobs/delete', { id: 'docs' });
  t.equal(again.status, 409);
  t.equal(again.json().precondition.reason, 'already-deleted');
  // yourRev echoes the request by presence: no key when ifMatchRev was not sent, null when null was.
  t.notOk(Object.hasOwn(again.json().precondition, 'yourRev'), 'not sent: no yourRev');
  const againNull = await post('/jobs/delete', { id: 'docs', ifMatchRev: null });
  t.equal(againNull.json().precondition.reason, 'already-deleted');
  t.ok(Object.hasOwn(againNull.json().precondition, 'yourRev'), 'null sent: yourRev present');
  t.equal(againNull.json().precondition.yourRev, null);
  const againNumber = await post('/jobs/delete', { id: 'docs', ifMatchRev: 3 });
  t.equal(againNumber.json().precondition.yourRev, 3);
  // writes against the deleted job
  const under = await post('/jobs', { ...MINIMAL, ifMatchRev: 3 });
  t.equal(under.status, 409);
  t.equal(under.json().precondition.reason, 'deleted-under-you');
  const resurrect = await post('/jobs', { ...MINIMAL, ifMatchRev: null });
  t.equal(resurrect.status, 409);
  t.equal(resurrect.json().precondition.reason, 'resurrect-refused');
  const back = await post('/jobs', MINIMAL);
  t.equal(back.status, 200);
  t.equal(back.json().configRev, 4, 'revisions continue after a delete');
});

t.test('jobs: validation refuses unknown properties and wrong types with a generic 400', async (t) => {
  const dir = tempDir(t, 'coffer-jobs-connections-');
  writeFileSync(
    join(dir, 'connections.json'),
    JSON.stringify({
      connections: { assets: { type: 's3', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true } },
    }),
  );
  const { url } = await startEngine(t, { ENGINE_CONNECTIONS_FILE: join(dir, 'connections.json') });
  const post = (body: unknown, raw?: string) =>
    http(`${url}/admin/jobs`, { headers: { ...bearer(), 'content-type': 'application/json' }, body, raw });
  const cases: Array<[string, unknown]> = [
    ['unknown top-level property', { ...MINIMAL, cadance: 5 }],
    ['unknown source property', { ...MINIMAL, source: { type: 'files', path: '/x', pasword: 'y' } }],
    ['string cadence', { ...MINIMAL, cadenceSeconds: '3600' }],
    ['cadence too small', { ...MINIMAL, cadenceSeconds: 1 }],
    ['unknown source type', { ...MINIMAL, source: { type: 'ftp', path: '/x' } }],
    ['relative path', { ...MINIMAL, source: { type: 'files', path: 'rel' } }],
    ['bad id', { ...MINIMAL, id: '../etc' }],
    ['missing source', { id: 'x', cadenceSeconds: 3600 }],
    ['fractional ifMatchRev', { ...MINIMAL, ifMatchRev: 1.5 }],
    ['array body', [MINIMAL]],
  ];
  for (const [name, body] of cases) {
    const r = await post(body);
    t.equal(r.status, 400, name);
    t.same(Object.keys(r.json()), ['error'], name);
  }
  for (const raw of ['{"id": "docs", "cadenceSeconds": ', 'nope', '{"__proto__": {"x": 1}, "id": "a"}']) {
    const r = await post(undefined, raw);
    t.equal(r.status, 400, `malformed: ${raw.slice(0, 12)}`);
    t.same(Object.keys(r.json()), ['error']);
  }
  const ok = await post({
    id: 'full',
    name: 'Full job',
    cadenceSeconds: 86400,
    enabled: false,
    source: { type: 's3', connection: 'assets', bucket: 'my-bucket', prefix: 'p/' },
    destinations: ['default'],
    retention: { keepLast: 10, keepDays: 30 },
    restoreTestCadenceSeconds: 604800,
  });
  t.equal(ok.status, 200, ok.text);
});

t.test('jobs/bulk: continue-on-error, index-aligned outcomes, 100 cap with maxBatch', async (t) => {
  const { url } = await startEngine(t);
  const bulk = (jobs: unknown[]) => http(`${url}/admin/jobs/bulk`, { headers: bearer(), body: { jobs } });
  const r = await bulk([
    MINIMAL,
    { ...MINIMAL, id: 'b', cadenceSeconds: 'x' },
    { ...MINIMAL, id: 'c' },
    { ...MINIMAL, ifMatchRev: null },
    { id: 'e', cadenceSeconds: 60, source: { type: 'files', path: '/srv/e', include: ['a/'] } },
  ]);
  t.equal(r.status, 200, r.text);
  const { outcomes } = r.json();
  t.equal(outcomes.length, 5);
  t.same(
    outcomes.map((o: { index: number; outcome: string }) => [o.index, o.outcome]),
    [
      [0, 'applied'],
      [1, 'error'],
      [2, 'applied'],
      [3, 'error'],
      [4, 'applied'],
    ],
  );
  t.equal(outcomes[3].precondition.reason, 'already-exists');
  t.type(outcomes[1].error, 'string');

  const big = await bulk(Array.from({ length: 101 }, (_, i) => ({ ...MINIMAL, id: `j${i}` })));
  t.equal(big.status, 400);
  t.equal(big.json().maxBatch, 100);
  const list = await http(`${url}/admin/jobs`, { headers: bearer() });
  t.equal(list.json().jobs.length, 3, 'an oversized batch is refused whole');
  const hundred = await bulk(Array.from({ length: 100 }, (_, i) => ({ ...MINIMAL, id: `j${i}` })));
  t.equal(hundred.status, 200);
  t.equal(hundred.json().applied, 100);
});

t.test('capability gate, then the per-caller rate limit', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const { url, app } = await startEngine(
    t,
    { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
    {
      testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert },
      rateLimit: { max: 3, windowSeconds: 60 },
    },
  );
  const as = async (sub: string) => ({
    'perimeter-access-jwt-assertion': await keys.sign({ sub, email: `${sub}@example.com` }),
  });
  const viewer = await as('viewer-1');
  await app.state.roles.assign({
    subject: `${ISSUER}#op-1`,
    role: 'operator',
    email: 'op-1@example.com',
    grantedBy: null,
  });
  const operator = await as('op-1');

  // A viewer can read but not write; refusals never consume the rate limit.
  t.equal((await http(`${url}/admin/jobs`, { headers: viewer })).status, 200);
  for (let i = 0; i < 5; i++) {
    const r = await http(`${url}/admin/jobs`, { headers: viewer, body: MINIMAL });
    t.equal(r.status, 403);
    t.same(r.json(), { error: 'forbidden', required: 'job.write', have: 'viewer' });
  }
  const del = await http(`${url}/admin/jobs/delete`, { headers: viewer, body: { id: 'docs' } });
  t.same(del.json(), { error: 'forbidden', required: 'job.delete', have: 'viewer' });

  // An operator holds job.write but not scheduledtest.config.
  const cadence = await http(`${url}/admin/jobs`, {
    headers: operator,
    body: { ...MINIMAL, id: 'rt', restoreTestCadenceSeconds: 86400 },
  });
  t.equal(cadence.status, 403);
  t.same(cadence.json(), { error: 'forbidden', required: 'scheduledtest.config', have: 'operator' });

  for (let i = 0; i < 2; i++) {
    const r = await http(`${url}/admin/jobs`, { headers: operator, body: { ...MINIMAL, id: `op${i}` } });
    t.equal(r.status, 200, r.text);
    t.match(r.headers.get('ratelimit-policy'), '"mutations";q=3;w=60');
    t.match(r.headers.get('ratelimit'), new RegExp(`^"mutations";r=${1 - i};t=\\d+$`));
  }
  const limited = await http(`${url}/admin/jobs`, { headers: operator, body: MINIMAL });
  t.equal(limited.status, 429);
  t.match(limited.headers.get('content-type'), /^application\/problem\+json/);
  t.same(limited.json(), {
    type: 'urn:engine:error:rate-limited',
    title: 'Too many requests',
    status: 429,
    error: 'rate limited',
  });
  const retry = limited.headers.get('retry-after');
  t.match(retry, /^\d+$/);
  t.ok(Number(retry) >= 1);
  t.match(limited.headers.get('ratelimit'), /^"mutations";r=0;t=\d+$/);
  t.equal(limited.headers.get('ratelimit-policy'), '"mutations";q=3;w=60');
  t.equal(limited.headers.get('x-ratelimit-limit'), null, 'no older-draft headers');
  // Per caller: the admin token has its own budget; reads are not limited.
  t.equal(
    (await http(`${url}/admin/jobs`, { headers: bearer(), body: { ...MINIMAL, id: 'adm' } })).status,
    200,
  );
  t.equal((await http(`${url}/admin/jobs`, { headers: operator })).status, 200);
});

t.test('the rate limiter fails open when its store errors', async (t) => {
  function BrokenStore() {}
  BrokenStore.prototype.incr = (_key: string, cb: (err: Error) => void) => cb(new Error('store down'));
  BrokenStore.prototype.child = function () {
    return this;
  };
  const { url, logs } = await startEngine(
    t,
    {},
    { rateLimit: { max: 1, windowSeconds: 60, store: BrokenStore } },
  );
  for (let i = 0; i < 3; i++) {
    const r = await http(`${url}/admin/jobs`, { headers: bearer(), body: { ...MINIMAL, id: `f${i}` } });
    t.equal(r.status, 200, r.text);
  }
  t.match(logs.join(''), /failing open/);
});

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(
    `key absent: concurrent upserts by a caller without scheduledtest.config are all applied (${backend})`,
    async (t) => {
      // The key-absent row of the precondition table: no base check, whoever writes. The cadence rule
      // for callers without scheduledtest.config must not turn into a hidden base check that refuses
      // a write because another writer moved the job meanwhile.
      const pki = makePki(tempDir(t));
      const keys = await startKeySet(pki);
      t.teardown(() => keys.close());
      const { url, app } = await startEngine(
        t,
        {
          PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
          PERIMETER_ACCESS_AUD: AUDIENCE,
          ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
        },
        {
          testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert },
          rateLimit: { max: 1000, windowSeconds: 60 },
        },
      );
      await app.state.roles.assign({
        subject: `${ISSUER}#op-2`,
        role: 'operator',
        email: 'op-2@example.com',
        grantedBy: null,
      });
      const operator = {
        'perimeter-access-jwt-assertion': await keys.sign({ sub: 'op-2', email: 'op-2@example.com' }),
      };
      t.equal((await http(`${url}/admin/jobs`, { headers: operator, body: MINIMAL })).status, 200);
      const writes = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          http(`${url}/admin/jobs`, { headers: operator, body: { ...MINIMAL, cadenceSeconds: 3601 + i } }),
        ),
      );
      t.same(
        writes.map((w) => w.status),
        writes.map(() => 200),
        `every key-absent write applied: ${writes.filter((w) => w.status !== 200).map((w) => w.text)[0] ?? ''}`,
      );
      const job = await app.state.jobs.get('docs');
      t.equal(job?.configRev, 31, 'each write made its own revision');
      // The cadence rule still holds, inside the same transaction.
      const cadence = await http(`${url}/admin/jobs`, {
        headers: operator,
        body: { ...MINIMAL, restoreTestCadenceSeconds: 86400 },
      });
      t.equal(cadence.status, 403);
      t.same(cadence.json(), { error: 'forbidden', required: 'scheduledtest.config', have: 'operator' });
      await http(`${url}/admin/jobs`, {
        headers: bearer(),
        body: { ...MINIMAL, restoreTestCadenceSeconds: 86400 },
      });
      t.equal(
        (await http(`${url}/admin/jobs`, { headers: operator, body: { ...MINIMAL, cadenceSeconds: 60 } }))
          .status,
        403,
        'a write that would clear a cadence set by someone else is refused',
      );
      t.equal(
        (
          await http(`${url}/admin/jobs`, {
            headers: operator,
            body: { ...MINIMAL, cadenceSeconds: 60, restoreTestCadenceSeconds: 86400 },
          })
        ).status,
        200,
        'leaving the stored cadence as it is: applied',
      );
    },
  );
