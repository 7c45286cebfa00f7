/**
 * Pull credentials end to end on a real engine: owner-only mint and revoke (403 `required:
 * 'owner'` for others, recorded as refusals; the capability refusal of a job write too), the
 * credential shapes and lifetimes, replacement on re-mint, the redacted console view with the
 * pull trail, every presentation failure path (401 JSON), one credential reaching only its read,
 * and a marker secret that never appears in logs, audit rows or bundles.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { verifierOf } from '../../src/routes/support/grants.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

const OWNER = { sub: 'owner-1', email: 'owner@example.com' };
const VIEWER = { sub: 'viewer-1', email: 'viewer@example.com' };
const HOUR = 3600;
const DAY = 24 * HOUR;

t.test('pull credentials', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const env = { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE };
  const e = await startEngine(t, env, {
    testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert },
  });
  await e.app.state.roles.assign({
    subject: `${ISSUER}#owner-1`,
    role: 'owner',
    email: OWNER.email,
    grantedBy: null,
  });
  const as = async (who: typeof OWNER) => ({ 'perimeter-access-jwt-assertion': await keys.sign(who) });
  const admin = bearer();

  await t.test('owner only; refusals are audited', async (t) => {
    const r = await http(`${e.url}/admin/support/credentials`, {
      headers: await as(VIEWER),
      body: { scope: 'metrics' },
    });
    t.equal(r.status, 403);
    t.same(r.json(), { error: 'forbidden', required: 'owner', have: 'viewer' });
    const d = await http(`${e.url}/admin/support/credentials/delete`, {
      headers: await as(VIEWER),
      body: { scope: 'metrics' },
    });
    t.equal(d.status, 403);
    const j = await http(`${e.url}/admin/jobs`, {
      headers: await as(VIEWER),
      body: { id: 'x', cadenceSeconds: 3600, source: { type: 'files', path: '/x' } },
    });
    t.equal(j.status, 403);
    const list = (await http(`${e.url}/admin/audit?outcome=refused`, { headers: admin })).json();
    const refusals = list.events.filter((ev: { outcome: string }) => ev.outcome === 'refused');
    t.same(
      refusals.map((ev: { action: string }) => ev.action),
      ['job-upsert', 'credential-revoke', 'credential-mint'],
    );
    t.equal(refusals[0].detail.required, 'job.write');
    t.equal(refusals[0].actor.email, 'viewer@example.com');
    t.equal(refusals[0].actor.method, 'perimeter-jwt');
    t.equal(refusals[0].role, 'viewer');
    t.equal(
      (await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'nope' } })).status,
      400,
    );
  });

  await t.test('shapes, lifetimes, grantedBy, replacement', async (t) => {
    const start = Date.now();
    const m = (
      await http(`${e.url}/admin/support/credentials`, {
        headers: await as(OWNER),
        body: { scope: 'diagnostics' },
      })
    ).json();
    t.match(m.clientId, /^dpc_[A-Za-z0-9_-]{22}$/);
    t.match(m.secret, /^dps_[A-Za-z0-9_-]{32}$/, '24 random bytes, base64url');
    t.equal(m.credential, `${m.clientId}.${m.secret}`);
    t.equal(m.grantedBy, 'owner@example.com');
    t.equal(m.lifetimeSeconds, 72 * HOUR);
    t.ok(Math.abs(Date.parse(m.expiresAt) - start - 72 * HOUR * 1000) < 60_000);
    t.equal(m.replaced, false);
    const stored = await e.app.state.credentials.get('diagnostics');
    t.equal(stored?.verifier, verifierOf(m.secret));
    t.match(stored?.verifier, /^[0-9a-f]{96}$/);
    const cases: Array<[string, number | undefined, number]> = [
      ['diagnostics', 1, 60],
      ['diagnostics', 30 * DAY, 7 * DAY],
      ['audit-feed', undefined, 90 * DAY],
      ['audit-feed', 400 * DAY, 365 * DAY],
      ['metrics', undefined, 90 * DAY],
      ['metrics', 120.9, 120],
    ];
    for (const [scope, lifetimeSeconds, want] of cases) {
      const r = (
        await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope, lifetimeSeconds } })
      ).json();
      t.equal(r.lifetimeSeconds, want, `${scope} ${lifetimeSeconds}`);
      t.equal(r.grantedBy, null, 'bare token grants have no email');
    }
    const again = (
      await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'diagnostics' } })
    ).json();
    t.equal(again.replaced, true);
    const old = await http(`${e.url}/support/diagnostics`, {
      headers: { authorization: `Bearer ${m.credential}` },
    });
    t.equal(old.status, 401, 'the replaced credential stopped working');
  });

  await t.test('presentation failures are 401 JSON; a credential reaches only its read', async (t) => {
    const mint = async (scope: string, lifetimeSeconds?: number) =>
      (
        await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope, lifetimeSeconds } })
      ).json();
    const feed = await mint('audit-feed');
    const metrics = await mint('metrics');
    const get = (path: string, authorization?: string) =>
      http(`${e.url}${path}`, { headers: authorization === undefined ? {} : { authorization } });
    t.equal((await get('/support/audit-feed', `Bearer ${feed.credential}`)).status, 200);
    const failures: Array<[string, string | undefined, string]> = [
      ['no header', undefined, '/support/audit-feed'],
      ['not bearer', `Basic ${feed.credential}`, '/support/audit-feed'],
      ['no dot', `Bearer ${feed.clientId}${feed.secret}`, '/support/audit-feed'],
      ['client id mismatch', `Bearer dpc_AAAAAAAAAAAAAAAAAAAAAA.${feed.secret}`, '/support/audit-feed'],
      [
        'secret prefix',
        `Bearer ${feed.clientId}.${feed.secret.replace('dps_', 'dpx_')}`,
        '/support/audit-feed',
      ],
      ['secret mismatch', `Bearer ${feed.clientId}.${feed.secret.slice(0, -2)}AA`, '/support/audit-feed'],
      ['secret with extra dot part', `Bearer ${feed.clientId}.${feed.secret}.x`, '/support/audit-feed'],
      ['admin token', `Bearer ${admin.authorization.slice(7)}`, '/support/audit-feed'],
      ['feed credential on metrics', `Bearer ${feed.credential}`, '/metrics'],
      ['metrics credential on feed', `Bearer ${metrics.credential}`, '/support/audit-feed'],
      ['feed credential on diagnostics', `Bearer ${feed.credential}`, '/support/diagnostics'],
    ];
    for (const [name, authz, path] of failures) {
      const r = await get(path, authz);
      t.equal(r.status, 401, name);
      t.same(r.json(), { error: 'unauthorised' }, name);
      t.match(r.headers.get('content-type'), /application\/json/, name);
      t.equal(r.headers.get('strict-transport-security'), 'max-age=63072000; includeSubDomains', name);
      t.equal(r.headers.get('access-control-allow-origin'), null, name);
    }
    // Expired: a grant whose expiry passed (written directly, as time would).
    const short = await mint('diagnostics');
    const g = (await e.app.state.credentials.get('diagnostics'))!;
    await e.app.state.credentials.replace({
      ...g,
      expiresAt: new Date(Date.now() - 1000).toISOString(),
    });
    const expired = await get('/support/diagnostics', `Bearer ${short.credential}`);
    t.equal(expired.status, 401, 'expired');
    // Revoked: no grant for the scope.
    t.equal(
      (
        await http(`${e.url}/admin/support/credentials/delete`, {
          headers: admin,
          body: { scope: 'metrics' },
        })
      ).json().revoked,
      true,
    );
    t.equal((await get('/metrics', `Bearer ${metrics.credential}`)).status, 401, 'revoked');
    t.equal(
      (
        await http(`${e.url}/admin/support/credentials/delete`, {
          headers: admin,
          body: { scope: 'metrics' },
        })
      ).json().revoked,
      false,
    );
    // Wrong methods and sub-paths are 404 before any credential check.
    for (const [method, path] of [
      ['POST', '/support/audit-feed'],
      ['HEAD', '/support/audit-feed'],
      ['DELETE', '/metrics'],
      ['GET', '/support/audit-feed/x'],
      ['GET', '/support/diagnostics/'],
      ['GET', '/support'],
      ['GET', '/metrics/x'],
    ]) {
      const r = await fetch(`${e.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${feed.credential}` },
      });
      t.equal(r.status, 404, `${method} ${path}`);
    }
  });

  await t.test('console view: redacted state and the pull trail', async (t) => {
    const feed = (
      await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'audit-feed' } })
    ).json();
    for (let i = 0; i < 3; i++) {
      t.equal(
        (
          await http(`${e.url}/support/audit-feed`, {
            headers: { authorization: `Bearer ${feed.credential}` },
          })
        ).status,
        200,
      );
    }
    let view: { credentials: Array<Record<string, unknown>> } | undefined;
    for (let i = 0; i < 50; i++) {
      view = (await http(`${e.url}/admin/support`, { headers: await as(VIEWER) })).json();
      const c = view!.credentials.find((x) => x.scope === 'audit-feed')!;
      if ((c.pulls as string[]).length === 3) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const c = view!.credentials.find((x) => x.scope === 'audit-feed')!;
    t.equal((c.pulls as string[]).length, 3, 'three pulls in the trail');
    t.equal(c.active, true);
    t.equal(c.expired, false);
    t.equal(c.clientId, feed.clientId);
    const diag = view!.credentials.find((x) => x.scope === 'diagnostics')!;
    t.equal(diag.expired, true);
    t.equal(diag.active, false);
    const text = JSON.stringify(view);
    t.notMatch(text, /dps_/, 'no secret');
    for (const g of await e.app.state.credentials.list()) t.notOk(text.includes(g.verifier), 'no verifier');
    t.notMatch(text, /verifier/);
  });

  await t.test('a minted secret never reaches logs, audit rows or bundles', async (t) => {
    const minted = (
      await http(`${e.url}/admin/support/credentials`, { headers: admin, body: { scope: 'diagnostics' } })
    ).json();
    const secret: string = minted.secret;
    const bundleRes = await http(`${e.url}/support/diagnostics`, {
      headers: { authorization: `Bearer ${minted.credential}` },
    });
    t.equal(bundleRes.status, 200);
    const adminBundle = await http(`${e.url}/admin/support/bundle`, { headers: admin });
    await http(`${e.url}/support/diagnostics`, {
      headers: { authorization: `Bearer ${minted.clientId}.dps_wrong` },
    });
    const db = new DatabaseSync(join(e.dataDir, 'state.sqlite'));
    const rows = db.prepare('SELECT * FROM audit_events').all();
    db.close();
    const haystacks = {
      logs: e.logs.join('\n'),
      audit: JSON.stringify(rows),
      bundle: bundleRes.text,
      adminBundle: adminBundle.text,
      sqlite: readFileSync(join(e.dataDir, 'state.sqlite')).toString('latin1'),
    };
    for (const [name, text] of Object.entries(haystacks)) {
      t.notOk(text.includes(secret), `${name}: no secret`);
      t.notOk(text.includes(secret.slice(4)), `${name}: no secret body`);
    }
    t.ok(haystacks.audit.includes('credential-mint'), 'the mint itself is audited');
  });
});
