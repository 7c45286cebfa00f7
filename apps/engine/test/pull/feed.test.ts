/**
 * The audit feed pull on a real engine: a consumer that polls with afterSeq and checks every
 * prevHash against the previous hash until it reaches headHash; every parameter rule; the 120 per
 * 60 s window with Retry-After; fail closed (503) when the state cannot be read.
 */
import { GENESIS_HASH, hashEvent, verifyFeedPage } from '@coffer/audit';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';

const admin = bearer();

async function mint(url: string, scope: string) {
  const r = await http(`${url}/admin/support/credentials`, { headers: admin, body: { scope } });
  return r.json().credential as string;
}

t.test('feed consumer, parameter rules, rate window', async (t) => {
  const e = await startEngine(t);
  for (let i = 0; i < 25; i++) {
    await http(`${e.url}/admin/jobs`, {
      headers: admin,
      body: { id: `job-${i}`, cadenceSeconds: 3600, source: { type: 'files', path: '/srv' } },
    });
  }
  const cred = await mint(e.url, 'audit-feed');
  const pull = (query: string) =>
    http(`${e.url}/support/audit-feed${query}`, { headers: { authorization: `Bearer ${cred}` } });

  await t.test('a consumer polls with afterSeq until it reaches headHash', async (t) => {
    let afterSeq = 0;
    let prevHash = GENESIS_HASH as string;
    let anchor = { seq: 0, hash: GENESIS_HASH as string };
    let pages = 0;
    for (;;) {
      const r = await pull(`?afterSeq=${afterSeq}&limit=7`);
      t.equal(r.status, 200);
      const page = r.json();
      pages++;
      t.equal(page.kind, 'engine-audit-feed');
      t.equal(page.v, 1);
      t.equal(page.afterSeq, afterSeq);
      t.equal(page.count, page.events.length);
      for (const ev of page.events) {
        if (ev.prevHash !== prevHash) t.fail(`seq ${ev.seq}: prevHash does not match the previous hash`);
        if (hashEvent(ev) !== ev.hash) t.fail(`seq ${ev.seq}: hash does not recompute`);
        prevHash = ev.hash;
      }
      const checked = verifyFeedPage(page, anchor);
      t.equal(checked.ok, true, 'the package verifier agrees');
      if (checked.ok) anchor = { seq: checked.headSeq, hash: checked.headHash };
      if (page.count === 0) t.equal(page.nextAfterSeq, afterSeq);
      afterSeq = page.nextAfterSeq;
      if (afterSeq === page.headSeq) {
        t.equal(prevHash, page.headHash, 'caught up: last hash equals headHash');
        break;
      }
      if (pages > 20) throw new Error('never caught up');
    }
    t.ok(pages >= 4, 'several pages');
    const empty = (await pull(`?afterSeq=${afterSeq}`)).json();
    t.same([empty.count, empty.nextAfterSeq, empty.gapBefore], [0, afterSeq, false]);
  });

  await t.test('parameter rules', async (t) => {
    for (const bad of ['abc', '-1', 'Infinity', 'NaN', '-0.5']) {
      const r = await pull(`?afterSeq=${bad}`);
      t.equal(r.status, 400, bad);
      t.same(r.json(), { error: 'afterSeq must be a non-negative integer' }, bad);
    }
    t.equal((await pull('?afterSeq=')).json().afterSeq, 0, 'empty is 0');
    t.equal((await pull('')).json().afterSeq, 0, 'absent is 0');
    const floored = (await pull('?afterSeq=2.9&limit=1')).json();
    t.same([floored.afterSeq, floored.events[0].seq], [2, 3], 'fractions floored; seq strictly greater');
    t.equal((await pull('?limit=0')).json().count, 1, 'limit clamped up to 1');
    t.equal((await pull('?limit=-5')).json().count, 1);
    const all = (await pull('?limit=5000')).json();
    t.equal(all.count, all.headSeq, 'limit clamped to 1000 (all events fit)');
    t.equal((await pull('?limit=abc')).json().count, all.headSeq, 'non-numeric limit is the default 500');
  });

  await t.test('120 pulls per 60 s per credential, then 429 with Retry-After', async (t) => {
    const fresh = await mint(e.url, 'audit-feed'); // a new client id: a new window
    const go = () =>
      http(`${e.url}/support/audit-feed?limit=1`, { headers: { authorization: `Bearer ${fresh}` } });
    let ok = 0;
    for (let i = 0; i < 120; i++) if ((await go()).status === 200) ok++;
    t.equal(ok, 120);
    const r = await go();
    t.equal(r.status, 429);
    t.match(r.headers.get('content-type'), /application\/problem\+json/);
    t.same(r.json(), {
      type: 'urn:engine:error:rate-limited',
      title: 'Too many requests',
      status: 429,
      error: 'rate limited',
    });
    const retry = Number(r.headers.get('retry-after'));
    t.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, 'Retry-After whole seconds, at least 1');
    t.equal(r.headers.get('strict-transport-security'), 'max-age=63072000; includeSubDomains');
    // The refusal is not an auth failure and does not touch other scopes.
    const other = await mint(e.url, 'metrics');
    t.equal((await http(`${e.url}/metrics`, { headers: { authorization: `Bearer ${other}` } })).status, 200);
    // A wrong credential is still 401, never 429.
    const wrong = await http(`${e.url}/support/audit-feed`, {
      headers: { authorization: 'Bearer dpc_x.dps_y' },
    });
    t.equal(wrong.status, 401);
  });
});

t.test('a failing grant or audit read is 503 (fail closed)', async (t) => {
  const e = await startEngine(t);
  const feed = await mint(e.url, 'audit-feed');
  const diag = await mint(e.url, 'diagnostics');
  const metrics = await mint(e.url, 'metrics');
  await e.app.state.close();
  for (const [path, cred] of [
    ['/support/audit-feed', feed],
    ['/support/diagnostics', diag],
    ['/metrics', metrics],
  ] as const) {
    const r = await http(`${e.url}${path}`, { headers: { authorization: `Bearer ${cred}` } });
    t.equal(r.status, 503, path);
    t.same(r.json(), { error: 'unavailable' }, path);
  }
  const r = await http(`${e.url}/support/audit-feed`);
  t.equal(r.status, 503, 'even without a credential the grant read comes first');
});
