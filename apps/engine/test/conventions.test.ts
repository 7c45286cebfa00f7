import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { BASE_HARDENING, FULL_HARDENING } from '../src/plugins/conventions.ts';
import { SERVICE_NAME } from '../src/version.ts';
import { baseEnv, http, type Reply, startEngine } from './helpers/engine.ts';

const ORIGIN = 'https://console.coffer.test';
const OPTIONAL_FULL = ['strict-transport-security', 'cache-control', 'pragma'];

function hasSet(t: Test, r: Reply, set: Readonly<Record<string, string>>, label: string) {
  for (const [name, value] of Object.entries(set)) t.equal(r.headers.get(name), value, `${label}: ${name}`);
}

t.test('path families, hardening headers, 404s', async (t) => {
  const { url } = await startEngine(t, { CONSOLE_ORIGIN: ORIGIN });

  const banner = await http(`${url}/`);
  t.equal(banner.status, 200);
  t.match(banner.headers.get('content-type'), /^text\/plain/);
  t.match(banner.text, /coffer-engine/);
  hasSet(t, banner, BASE_HARDENING, 'GET /');
  for (const h of OPTIONAL_FULL) t.equal(banner.headers.get(h), null, `GET / has no ${h}`);

  const ready = await http(`${url}/ready`);
  t.equal(ready.status, 200);
  t.same(ready.json(), { status: 'ready', service: SERVICE_NAME, version: '0.0.0' });
  hasSet(t, ready, BASE_HARDENING, 'GET /ready');
  t.equal(ready.headers.get('strict-transport-security'), null);
  t.equal(ready.headers.get('content-security-policy'), null, 'no other helmet header');
  t.equal(ready.headers.get('x-dns-prefetch-control'), null, 'no other helmet header');

  for (const path of ['/nope', '/readyz', '/api/x', '/support', '/scim/v1/Users', '/scim']) {
    const r = await http(`${url}${path}`);
    t.equal(r.status, 404, path);
    t.equal(r.text, 'not found', path);
    t.match(r.headers.get('content-type'), /^text\/plain/, path);
  }
  const support = await http(`${url}/support/diagnostics`);
  t.equal(support.status, 401, 'the pull route exists: no credential is 401 (test/pull covers it)');
  hasSet(t, support, FULL_HARDENING, '/support/*');
  const metrics = await http(`${url}/metrics`);
  hasSet(t, metrics, FULL_HARDENING, 'GET /metrics');
  const scim = await http(`${url}/scim/v2/Users`);
  t.equal(scim.status, 503, 'SCIM not enabled without SCIM_BEARER_TOKEN');
  t.equal(scim.text, 'scim not enabled');
  hasSet(t, scim, BASE_HARDENING, '/scim/v2/*');
  t.equal(scim.headers.get('cache-control'), null);

  const unauth = await http(`${url}/admin/whoami`);
  t.equal(unauth.status, 401);
  t.equal(unauth.text, 'unauthorised');
  t.match(unauth.headers.get('content-type'), /^text\/plain/);
  hasSet(t, unauth, FULL_HARDENING, '401 on /admin/*');

  // Unknown admin paths: authenticated first, then the plain 404; pre-auth prefixes 404 at once.
  t.equal((await http(`${url}/admin/no-such-route`)).status, 401);
  for (const p of [
    '/admin/test-fault/arm',
    '/admin/demo/reset',
    '/admin/auth/nope',
    '/admin/oidc/x',
    '/admin/saml/x',
  ]) {
    const r = await http(`${url}${p}`, { method: 'POST' });
    t.equal(r.status, 404, `${p} 404 before authentication`);
    t.equal(r.text, 'not found');
  }
});

t.test('SCIM facade gate with SCIM_BEARER_TOKEN', async (t) => {
  const { url } = await startEngine(t, { SCIM_BEARER_TOKEN: 'scim-token-0123456789' });
  t.equal((await http(`${url}/scim/v2/Users/1`, { method: 'DELETE' })).status, 401);
  const wrong = await http(`${url}/scim/v2/Users/1`, {
    method: 'DELETE',
    headers: { authorization: 'Bearer nope' },
  });
  t.equal(wrong.text, 'unauthorised');
  const ok = await http(`${url}/scim/v2/Users/1`, {
    method: 'DELETE',
    headers: { authorization: 'Bearer scim-token-0123456789' },
  });
  t.equal(ok.status, 404);
});

t.test('admin mutations are POST only: PUT, PATCH, DELETE are not routes', async (t) => {
  const { url } = await startEngine(t);
  for (const method of ['PUT', 'PATCH', 'DELETE']) {
    const r = await http(`${url}/admin/jobs`, {
      method,
      headers: {
        authorization: 'Bearer test-admin-token-0123456789abcdef',
        'content-type': 'application/json',
      },
      raw: '{}',
    });
    t.equal(r.status, 404, method);
    t.equal(r.text, 'not found', method);
  }
});

t.test('GET /admin/health: before auth, wildcard origin, no credentials header', async (t) => {
  const { url } = await startEngine(t, { CONSOLE_ORIGIN: ORIGIN });
  for (const origin of [undefined, ORIGIN, 'https://evil.example']) {
    const r = await http(`${url}/admin/health`, { headers: origin ? { origin } : {} });
    t.equal(r.status, 200);
    t.same(r.json(), { ok: true, service: SERVICE_NAME });
    t.equal(r.headers.get('access-control-allow-origin'), '*');
    t.equal(r.headers.get('access-control-allow-credentials'), null);
    hasSet(t, r, FULL_HARDENING, 'health');
  }
});

t.test('CORS: exact console origin only, preflight 204 with CORS and hardening headers', async (t) => {
  const { url } = await startEngine(t, { CONSOLE_ORIGIN: ORIGIN });
  const pre = await http(`${url}/admin/jobs`, {
    method: 'OPTIONS',
    headers: {
      origin: ORIGIN,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    },
  });
  t.equal(pre.status, 204);
  t.equal(pre.headers.get('access-control-allow-origin'), ORIGIN);
  t.equal(pre.headers.get('access-control-allow-credentials'), 'true');
  t.equal(pre.headers.get('access-control-allow-methods'), 'GET, POST, OPTIONS');
  t.match(pre.headers.get('access-control-allow-headers'), /perimeter-access-jwt-assertion/);
  hasSet(t, pre, FULL_HARDENING, 'preflight');

  for (const bad of [
    'https://evil.example',
    `${ORIGIN}.evil.example`,
    'http://console.coffer.test',
    'null',
  ]) {
    const r = await http(`${url}/admin/jobs`, {
      method: 'OPTIONS',
      headers: { origin: bad, 'access-control-request-method': 'POST' },
    });
    t.equal(r.headers.get('access-control-allow-origin'), null, `no CORS for ${bad}`);
    t.not(r.status, 204, `no preflight success for ${bad}`);
    const g = await http(`${url}/admin/whoami`, { headers: { origin: bad } });
    t.equal(g.headers.get('access-control-allow-origin'), null);
  }
  const simple = await http(`${url}/admin/whoami`, { headers: { origin: ORIGIN } });
  t.equal(
    simple.headers.get('access-control-allow-origin'),
    ORIGIN,
    'CORS on an actual request (even a 401)',
  );
  const ready = await http(`${url}/ready`, { headers: { origin: ORIGIN } });
  t.equal(ready.headers.get('access-control-allow-origin'), null, 'no CORS outside /admin');
  const preReady = await http(`${url}/ready`, {
    method: 'OPTIONS',
    headers: { origin: ORIGIN, 'access-control-request-method': 'GET' },
  });
  t.equal(preReady.status, 404);
});

t.test('no CORS at all without CONSOLE_ORIGIN', async (t) => {
  const { url } = await startEngine(t);
  const r = await http(`${url}/admin/jobs`, {
    method: 'OPTIONS',
    headers: { origin: 'https://console.coffer.test', 'access-control-request-method': 'POST' },
  });
  t.equal(r.headers.get('access-control-allow-origin'), null);
  t.equal(r.status, 404);
});

t.test('an unhandled fault is a 500 problem+json with the request id and no detail', async (t) => {
  const dir = tempDir(t);
  const app = await buildApp({ config: loadConfig(baseEnv(dir)), logger: false });
  t.teardown(() => app.close());
  app.get('/boom', async () => {
    throw new Error('SECRET-DETAIL of a fault');
  });
  const r = await app.inject({ method: 'GET', url: '/boom' });
  t.equal(r.statusCode, 500);
  t.match(r.headers['content-type'], /^application\/problem\+json/);
  const body = r.json();
  t.same(Object.keys(body).sort(), ['error', 'requestId', 'status', 'title', 'type']);
  t.equal(body.type, 'urn:engine:error:internal-error');
  t.equal(body.status, 500);
  t.equal(body.error, 'internal error');
  t.match(body.requestId, /^[0-9a-f-]{36}$/);
  t.notMatch(r.body, /SECRET/);
});

t.test(
  'a malformed body is a 400 { error }: wrong content type, oversized, empty (never 413/415)',
  async (t) => {
    const { url } = await startEngine(t);
    const auth = { authorization: 'Bearer test-admin-token-0123456789abcdef' };
    const cases: Array<[string, Record<string, string>, string]> = [
      ['text/plain body', { 'content-type': 'text/plain' }, '{"id":"x"}'],
      ['form body', { 'content-type': 'application/x-www-form-urlencoded' }, 'id=x'],
      [
        'oversized JSON body',
        { 'content-type': 'application/json' },
        JSON.stringify({ id: 'x', pad: 'y'.repeat(2 * 1024 * 1024) }),
      ],
      ['empty JSON body', { 'content-type': 'application/json' }, ''],
      ['broken JSON', { 'content-type': 'application/json' }, '{"id":'],
    ];
    for (const [name, headers, raw] of cases) {
      const r = await http(`${url}/admin/jobs`, { method: 'POST', headers: { ...auth, ...headers }, raw });
      t.equal(r.status, 400, name);
      t.match(r.headers.get('content-type'), /^application\/json/, name);
      t.same(Object.keys(r.json()), ['error'], name);
      t.type(r.json().error, 'string', name);
      hasSet(t, r, FULL_HARDENING, name);
    }
  },
);
