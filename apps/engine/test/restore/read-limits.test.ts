/**
 * Concurrency limits of restore dry runs and verifies (issue 13 item 9), with real concurrent HTTP
 * requests of several perimeter-JWT viewers against a started engine: per engine 2 and per caller
 * 1 (`ENGINE_RESTORE_READS_PER_ENGINE` / `_PER_CALLER`); a read over a limit is the
 * specification's 429 (problem+json, `Retry-After`, RateLimit headers), never queued; slots are
 * given back when a read ends, also when it fails.
 *
 * Each read verifies 64 MiB of incompressible records (hundreds of milliseconds at least), so
 * requests sent together are all in flight at once.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { loadConfig } from '../../src/config.ts';
import type { ConfigError } from '../../src/errors.ts';
import { AUDIENCE, callerHeaders, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { restoreWorld } from './helpers.ts';

const pki = makePki(tempDir(t, 'coffer-reads-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const w = await restoreWorld(
  t,
  { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
  { testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert } },
);
const as = callerHeaders(keySet);
const src = join(tempDir(t, 'coffer-reads-src-'), 'tree');
mkdirSync(src, { recursive: true });
for (let i = 0; i < 4; i++) writeFileSync(join(src, `blob-${i}.bin`), randomBytes(16 * 1024 * 1024));
const runId = await w.backUp('blobs', { type: 'files', path: src });
const body = { runId, target: { namespaceId: join(w.roots, 'out') } };

t.test('documented defaults: 2 per engine, 1 per caller', async (t) => {
  t.same(loadConfig({}, '/srv').restoreReads, { perEngine: 2, perCaller: 1 });
  t.same(
    loadConfig({ ENGINE_RESTORE_READS_PER_ENGINE: '8', ENGINE_RESTORE_READS_PER_CALLER: '3' }, '/srv')
      .restoreReads,
    { perEngine: 8, perCaller: 3 },
  );
  try {
    loadConfig({ ENGINE_RESTORE_READS_PER_CALLER: '0' }, '/srv');
    t.fail('a limit of 0 accepted');
  } catch (e) {
    t.equal((e as ConfigError).variable, 'ENGINE_RESTORE_READS_PER_CALLER');
  }
});

t.test('concurrent dry runs and verifies of five viewers: two run, three get 429', async (t) => {
  const [carol, dave, erin, frank] = await Promise.all(['carol', 'dave', 'erin', 'frank'].map((s) => as(s)));
  const calls: Array<[string, string, Record<string, string>]> = [
    ['carol', '/restore', carol!],
    ['carol', '/restore/verify', carol!],
    ['dave', '/restore', dave!],
    ['erin', '/restore/verify', erin!],
    ['frank', '/restore', frank!],
  ];
  const replies = await Promise.all(calls.map(([, path, who]) => w.post(path, body, who)));
  const statuses = replies.map((r) => r.status);
  t.equal(statuses.filter((s) => s === 200).length, 2, `two in flight at once: ${statuses}`);
  t.equal(statuses.filter((s) => s === 429).length, 3, 'the others are refused, not queued');
  t.ok(statuses[0] !== 200 || statuses[1] !== 200, 'carol never has two at once');
  for (const r of replies.filter((r) => r.status === 429)) {
    t.match(r.headers.get('content-type'), /application\/problem\+json/);
    t.match(r.json(), { error: 'rate limited', status: 429 });
    t.equal(r.headers.get('retry-after'), '1');
    t.equal(r.headers.get('ratelimit-policy'), '"restore-reads";q=1');
  }
  for (const r of replies.filter((r) => r.status === 200))
    t.match(r.json(), { ok: true, recordsVerified: 4 });
  t.equal(w.e.app.restores.reads.active, 0, 'every slot given back');
});

t.test(
  'one caller: a second read while the first runs is 429; slots come back after a failure',
  async (t) => {
    const gina = await as('gina');
    const [first, second] = await Promise.all([
      w.post('/restore/verify', body, gina),
      w.post('/restore', body, gina),
    ]);
    t.same([first.status, second.status].sort(), [200, 429]);
    const failed = await w.post('/restore', { runId, target: { binding: 'nope' } }, gina);
    t.equal(failed.status, 400, 'a read that throws');
    t.equal(w.e.app.restores.reads.active, 0);
    t.equal((await w.post('/restore', body, gina)).status, 200, 'the slot was given back');
  },
);

t.test('an apply is not a read: it is not limited here', async (t) => {
  const busy = w.post('/restore', body, await as('henry'));
  const other = w.post('/restore', body, await as('ivan'));
  const apply = await w.post('/restore', { ...body, confirm: true });
  t.equal(apply.status, 202, apply.text);
  t.same([(await busy).status, (await other).status], [200, 200]);
  let view = (await w.get(`/restore/applies?id=${apply.json().applyId}`)).json();
  for (let i = 0; i < 2400 && view.status === 'running'; i++) {
    await new Promise((res) => setTimeout(res, 25));
    view = (await w.get(`/restore/applies?id=${apply.json().applyId}`)).json();
  }
  t.equal(view.status, 'succeeded');
});
