// Marker-secret test: the admin token and perimeter assertions never appear in a log line or a
// reply body, whatever path a request takes (success, refusal, malformed input, fault).
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { http, startEngine } from './helpers/engine.ts';
import { AUDIENCE, startKeySet, TEAM_DOMAIN } from './helpers/perimeter.ts';
import { makePki } from './helpers/tls.ts';

const MARKER_TOKEN = 'MARKER-admin-token-7f3c9a1e5b2d4c6e';
const MARKER_SCIM = 'MARKER-scim-token-0a1b2c3d';

t.test('admin token and JWT never reach logs or reply bodies', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const { url, app, logs } = await startEngine(
    t,
    {
      ADMIN_TOKEN: MARKER_TOKEN,
      SCIM_BEARER_TOKEN: MARKER_SCIM,
      PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
      PERIMETER_ACCESS_AUD: AUDIENCE,
      ENGINE_LOG_LEVEL: 'trace',
    },
    { testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  const jwt = await keys.sign({ sub: 'marker-user', email: 'm@example.com' });
  const badJwt = await keys.sign({ sub: 'marker-user' });
  const bodies: string[] = [];
  const send = async (path: string, init: Parameters<typeof http>[1]) => {
    const r = await http(`${url}${path}`, init);
    const headers: string[] = [];
    r.headers.forEach((v, k) => {
      headers.push(`${k}: ${v}`);
    });
    bodies.push(r.text, headers.join('\n'));
  };
  const withToken = { authorization: `Bearer ${MARKER_TOKEN}` };
  await send('/admin/whoami', { headers: withToken });
  await send('/admin/whoami', { headers: { authorization: `Bearer ${MARKER_TOKEN}-wrong` } });
  await send('/admin/whoami', { headers: { authorization: `Basic ${MARKER_TOKEN}` } });
  await send('/admin/status', { headers: withToken });
  await send('/admin/setup-state', { headers: withToken });
  await send('/admin/jobs', { headers: withToken, body: { id: 'x', cadenceSeconds: 1, source: {} } });
  await send('/admin/jobs', {
    headers: { ...withToken, 'content-type': 'application/json' },
    raw: `{"id":"${MARKER_TOKEN}`,
  });
  await send('/admin/jobs/bulk', {
    headers: withToken,
    body: {
      jobs: [
        { id: 'ok-id', secret: MARKER_TOKEN },
        { id: 'ok-2', cadenceSeconds: MARKER_TOKEN },
      ],
    },
  });
  await send('/admin/whoami', { headers: { 'perimeter-access-jwt-assertion': jwt } });
  await send('/admin/whoami', { headers: { 'perimeter-access-jwt-assertion': badJwt, ...withToken } });
  await send('/admin/nope', { headers: { 'perimeter-access-jwt-assertion': `${jwt}x` } });
  await send(`/nope?token=${'x'}`, { headers: withToken });
  await send('/scim/v2/Users', { headers: { authorization: `Bearer ${MARKER_SCIM}` } });
  await app.close();
  const everything = logs.join('\n') + bodies.join('\n');
  t.ok(logs.length > 10, 'logs were captured');
  for (const [name, secret] of [
    ['admin token', MARKER_TOKEN],
    ['scim token', MARKER_SCIM],
    ['valid JWT', jwt],
    ['invalid JWT', badJwt],
    ['JWT signature', jwt.split('.')[2] ?? 'missing'],
  ] as const) {
    t.notOk(everything.includes(secret), `${name} never appears`);
  }
});
