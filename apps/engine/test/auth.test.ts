import { createHmac } from 'node:crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { buildApp } from '../src/app.ts';
import { createPerimeterVerifier } from '../src/auth/perimeter.ts';
import { loadConfig } from '../src/config.ts';
import { retireAdminToken } from '../src/state/index.ts';
import { ADMIN_TOKEN, baseEnv, bearer, http, startEngine } from './helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from './helpers/perimeter.ts';
import { makePki } from './helpers/tls.ts';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);
const USER = { sub: 'user-123', email: 'Alice@Example.com' };

t.test('perimeter access JWT', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const env = { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE };
  const { url, logs } = await startEngine(t, env, {
    testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert },
  });
  const asJwt = (token: string, extra: Record<string, string> = {}) =>
    http(`${url}/admin/whoami`, { headers: { 'perimeter-access-jwt-assertion': token, ...extra } });

  await t.test(
    'a valid RS256 or ES256 assertion authenticates with subject = issuer + user id',
    async (t) => {
      for (const alg of ['RS256', 'ES256'] as const) {
        const r = await asJwt(await keys.sign(USER, { alg }));
        t.equal(r.status, 200, `${alg}: ${r.text}`);
        const who = r.json();
        t.equal(who.method, 'perimeter-access');
        t.equal(who.subject, `${ISSUER}#user-123`);
        t.equal(who.email, 'alice@example.com');
        t.equal(who.role, 'viewer', 'an unmatched caller is viewer');
        t.equal(who.roleSource, 'default');
      }
    },
  );

  const refused: Array<[string, () => Promise<string>]> = [
    ['expired', () => keys.sign(USER, { expiresIn: now() - 3600 })],
    ['wrong audience', () => keys.sign({ ...USER, aud: 'other-aud' })],
    ['wrong issuer', () => keys.sign({ ...USER, iss: 'https://evil.coffer.test' })],
    ['issuer over http', () => keys.sign({ ...USER, iss: `http://${TEAM_DOMAIN}` })],
    ['unknown kid', () => keys.sign(USER, { kid: 'no-such-key' })],
    ['missing email', () => keys.sign({ sub: 'user-123' })],
    ['unverified email', () => keys.sign({ ...USER, email_verified: false })],
    ['service token (empty subject, no email)', () => keys.sign({ sub: '', common_name: 'svc.access' })],
    [
      'alg none',
      async () =>
        `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...USER, iss: ISSUER, aud: AUDIENCE, iat: now(), exp: now() + 300 })}.`,
    ],
    [
      'HS256 signed with the public key',
      async () => {
        const head = `${b64({ alg: 'HS256', typ: 'JWT', kid: 'rsa-1' })}.${b64({ ...USER, iss: ISSUER, aud: AUDIENCE, iat: now(), exp: now() + 300 })}`;
        const mac = createHmac('sha256', keys.rsaPublicPem).update(head).digest('base64url');
        return `${head}.${mac}`;
      },
    ],
    [
      'tampered payload',
      async () => {
        const [h, , s] = (await keys.sign(USER)).split('.');
        return `${h}.${b64({ ...USER, sub: 'someone-else', iss: ISSUER, aud: AUDIENCE, iat: now(), exp: now() + 300 })}.${s}`;
      },
    ],
    ['garbage', async () => 'not-a-jwt'],
  ];
  for (const [name, make] of refused) {
    await t.test(`refused: ${name}`, async (t) => {
      const token = await make();
      const r = await asJwt(token);
      t.equal(r.status, 401);
      t.equal(r.text, 'unauthorised');
      // No fall-through: a valid admin token beside the bad assertion changes nothing.
      const both = await asJwt(token, bearer());
      t.equal(both.status, 401, 'a present-but-invalid assertion never falls through to the bearer');
      t.notOk(logs.join('').includes(token), 'the token never reaches the log');
    });
  }

  await t.test('no credential at all is 401', async (t) => {
    const r = await http(`${url}/admin/whoami`);
    t.equal(r.status, 401);
    t.equal(r.text, 'unauthorised');
  });

  await t.test('the router overwrites an inbound x-engine-caller', async (t) => {
    const r = await asJwt(await keys.sign(USER), {
      'x-engine-caller': JSON.stringify({ method: 'admin-token', subject: null }),
    });
    t.equal(r.status, 200);
    t.equal(r.json().subject, `${ISSUER}#user-123`);
  });
});

t.test('the key-set fetch follows no redirect and trusts only the pinned host', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const token = await keys.sign(USER);

  keys.mode = 'redirect';
  const redirected = createPerimeterVerifier({
    teamDomain: TEAM_DOMAIN,
    audience: AUDIENCE,
    jwksUrl: keys.jwksUrl,
    jwksCa: pki.caCert,
  });
  t.same(
    await redirected.verify(token),
    { ok: false, reason: 'keys-unavailable' },
    'a 302 is a failure, not followed',
  );

  keys.mode = 'serve';
  const untrusted = createPerimeterVerifier({
    teamDomain: TEAM_DOMAIN,
    audience: AUDIENCE,
    jwksUrl: keys.jwksUrl,
  });
  t.same(
    await untrusted.verify(token),
    { ok: false, reason: 'keys-unavailable' },
    'an untrusted certificate is refused',
  );

  const plain = createPerimeterVerifier({
    teamDomain: TEAM_DOMAIN,
    audience: AUDIENCE,
    jwksUrl: keys.jwksUrl.replace('https:', 'http:'),
    jwksCa: pki.caCert,
  });
  t.same(await plain.verify(token), { ok: false, reason: 'keys-unavailable' }, 'http is refused');

  const good = createPerimeterVerifier({
    teamDomain: TEAM_DOMAIN,
    audience: AUDIENCE,
    jwksUrl: keys.jwksUrl,
    jwksCa: pki.caCert,
  });
  const ok = await good.verify(token);
  t.ok(ok.ok);
  const before = keys.fetches;
  await good.verify(await keys.sign(USER));
  t.equal(keys.fetches, before, 'keys are cached between verifications');
});

t.test('an assertion on an engine without perimeter configuration is refused, never ignored', async (t) => {
  const { url } = await startEngine(t);
  const r = await http(`${url}/admin/whoami`, {
    headers: { 'perimeter-access-jwt-assertion': 'x.y.z', ...bearer() },
  });
  t.equal(r.status, 401);
});

t.test('admin bearer token', async (t) => {
  const { url } = await startEngine(t);
  const ok = await http(`${url}/admin/whoami`, { headers: bearer() });
  t.equal(ok.status, 200, ok.text);
  const who = ok.json();
  t.equal(who.method, 'admin-token');
  t.equal(who.role, 'owner');
  t.equal(who.email, null);
  t.equal(who.subject, null);
  t.equal(who.roleSource, 'admin-token');

  for (const header of [
    `Bearer ${ADMIN_TOKEN}x`,
    `Bearer ${ADMIN_TOKEN.slice(0, -1)}`,
    `bearer${ADMIN_TOKEN}`,
    `Basic ${Buffer.from(`u:${ADMIN_TOKEN}`).toString('base64')}`,
    'Bearer',
  ]) {
    const r = await http(`${url}/admin/whoami`, { headers: { authorization: header } });
    t.equal(r.status, 401, header.slice(0, 12));
    t.equal(r.text, 'unauthorised');
  }
});

t.test('admin token off when disabled or unset', async (t) => {
  const disabled = await startEngine(t, { ADMIN_TOKEN_DISABLED: '1' });
  t.equal((await http(`${disabled.url}/admin/whoami`, { headers: bearer() })).status, 401);
  const unset = await startEngine(t, { ADMIN_TOKEN: '' });
  t.equal((await http(`${unset.url}/admin/whoami`, { headers: bearer() })).status, 401);
});

t.test('x-engine-caller: the route sees the router-built value, never the inbound one', async (t) => {
  const dataDir = tempDir(t, 'coffer-engine-caller-');
  const config = loadConfig(baseEnv(dataDir, { HOST: '127.0.0.1', PORT: '0' }));
  const app = await buildApp({ config, logger: false });
  t.teardown(() => app.close());
  // A probe at the handler boundary: what every route handler would read from the request.
  const seen: Array<string | undefined> = [];
  app.addHook('preHandler', async (request) => {
    const v = request.headers['x-engine-caller'];
    seen.push(Array.isArray(v) ? v.join(',') : v);
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const forged = JSON.stringify({ method: 'perimeter-access', subject: 'https://evil.example#root' });

  const authed = await http(`${url}/admin/whoami`, { headers: { ...bearer(), 'x-engine-caller': forged } });
  t.equal(authed.status, 200);
  t.equal(seen.at(-1), JSON.stringify({ method: 'admin-token', subject: null }), 'overwritten by the router');

  const before = seen.length;
  const open = await http(`${url}/admin/health`, { headers: { 'x-engine-caller': forged } });
  t.equal(open.status, 200);
  t.equal(seen.length, before + 1, 'the probe ran for the pre-auth route');
  t.equal(seen.at(-1), undefined, 'an inbound value is dropped even where nobody authenticates');
  t.notOk(seen.includes(forged), 'the forged value never reached a handler');
});

t.test('admin token: a retired token is refused; an unreadable retire latch refuses it too', async (t) => {
  const retired = await startEngine(t);
  t.equal((await http(`${retired.url}/admin/whoami`, { headers: bearer() })).status, 200, 'live before');
  await retireAdminToken(retired.app.state, null);
  const after = await http(`${retired.url}/admin/whoami`, { headers: bearer() });
  t.equal(after.status, 401, 'retired: honoured from the next request on');
  t.equal(after.text, 'unauthorised');

  const unreadable = await startEngine(t);
  t.equal((await http(`${unreadable.url}/admin/whoami`, { headers: bearer() })).status, 200, 'live before');
  // The state store goes away under the engine: the latch cannot be read, so the token is refused.
  await unreadable.app.state.close();
  const closed = await http(`${unreadable.url}/admin/whoami`, { headers: bearer() });
  t.equal(closed.status, 401, 'fail closed when the retire latch cannot be read');
  t.equal(closed.text, 'unauthorised');
  t.notOk(
    unreadable.logs.join('').includes(ADMIN_TOKEN),
    'the token never reaches the log on the failure path',
  );
});
