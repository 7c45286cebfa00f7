// The console server: the engine's families forwarded verbatim (method, path, query, headers,
// body; the answer and its headers back unchanged), nothing else forwarded, X-Forwarded-For set
// to the peer (a browser's own value replaced), the UI under its CSP with screen paths served the
// single page, and configuration errors naming the variable.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { buildConsole, PROXIED_PREFIXES } from '../src/server/app.ts';
import { ConsoleConfigError, loadConsoleConfig } from '../src/server/config.ts';
import { UI_DIR } from './helpers/stack.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

async function upstream(t: { teardown(fn: () => unknown): void }): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
    res.setHeader('set-cookie', ['a=1; Path=/; HttpOnly', 'b=2; Path=/']);
    res.setHeader('x-engine-answer', 'yes');
    res.setHeader('content-security-policy', "default-src 'none'");
    res.writeHead(req.url?.startsWith('/admin/missing') ? 404 : 201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ echoed: req.url }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

t.test('the three families are forwarded verbatim', async (t) => {
  const up = await upstream(t);
  const app = await buildConsole(
    loadConsoleConfig({ CONSOLE_ENGINE_URL: up.url, CONSOLE_UI_DIR: UI_DIR, CONSOLE_LOG_LEVEL: 'silent' }),
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());

  const body = JSON.stringify({ id: 'j1', nested: { ü: 'x'.repeat(70_000) } });
  const r = await fetch(`${url}/admin/jobs?x=1&y=%20two`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin: 'http://console.example',
      cookie: '__Host-engine_session=abc',
      authorization: 'Bearer tok',
      'x-engine-csrf': 'c1',
      'x-engine-stepup': 'cfs_s',
      'x-forwarded-for': '203.0.113.9',
    },
    body,
  });
  t.equal(r.status, 201, 'status passed through');
  t.same(await r.json(), { echoed: '/admin/jobs?x=1&y=%20two' });
  t.equal(r.headers.get('x-engine-answer'), 'yes', 'engine headers back');
  t.same(r.headers.getSetCookie(), ['a=1; Path=/; HttpOnly', 'b=2; Path=/'], 'every Set-Cookie back');
  t.equal(
    r.headers.get('content-security-policy'),
    "default-src 'none'",
    "the engine's own CSP, not the UI's",
  );
  const s = up.seen[0]!;
  t.equal(s.method, 'POST');
  t.equal(s.url, '/admin/jobs?x=1&y=%20two', 'path and query unchanged');
  t.equal(s.body.toString('utf8'), body, 'body byte for byte (70 kB)');
  t.equal(s.headers.origin, 'http://console.example', 'Origin unchanged');
  t.equal(s.headers.cookie, '__Host-engine_session=abc');
  t.equal(s.headers.authorization, 'Bearer tok');
  t.equal(s.headers['x-engine-csrf'], 'c1');
  t.equal(s.headers['x-engine-stepup'], 'cfs_s');
  t.equal(s.headers['x-forwarded-for'], '127.0.0.1', "the peer's address, the browser's claim replaced");

  for (const [method, path] of [
    ['GET', '/support/diagnostics?afterSeq=3'],
    ['GET', '/metrics'],
    ['GET', '/admin/audit/export?format=csv'],
    ['OPTIONS', '/admin/jobs'],
  ] as const) {
    const before = up.seen.length;
    const res = await fetch(`${url}${path}`, { method });
    await res.arrayBuffer();
    t.equal(res.status, 201, `${method} ${path} forwarded`);
    t.equal(up.seen[before]?.url, path);
    t.equal(up.seen[before]?.method, method);
  }
  const missing = await fetch(`${url}/admin/missing`);
  await missing.arrayBuffer();
  t.equal(missing.status, 404, "the engine's 404 passes through");

  // Nothing outside the families reaches the engine.
  const before = up.seen.length;
  for (const path of ['/ready', '/scim/v2/Users', '/admin-x', '/restore/x', '/pull'])
    await (await fetch(`${url}${path}`)).arrayBuffer();
  t.equal(up.seen.length, before, 'other paths are not forwarded');
});

t.test('a live update step: the deploy-token header reaches the engine unchanged', async (t) => {
  // The engine takes the one-shot token from `x-engine-deploy-token` (docs/updates.md "Deploy
  // token"); the console forwards every request header, this one included, and adds none.
  const up = await upstream(t);
  const app = await buildConsole(
    loadConsoleConfig({ CONSOLE_ENGINE_URL: up.url, CONSOLE_UI_DIR: UI_DIR, CONSOLE_LOG_LEVEL: 'silent' }),
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  const token = `cfu_${'a'.repeat(24)}.${'B'.repeat(43)}`;
  const r = await fetch(`${url}/admin/update/apply`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin: 'http://console.example',
      cookie: '__Host-engine_session=abc',
      'x-engine-csrf': 'c1',
      'x-engine-stepup': 'cfs_s',
      'x-engine-deploy-token': token,
    },
    body: JSON.stringify({ dryRun: false }),
  });
  t.equal(r.status, 201);
  await r.arrayBuffer();
  const s = up.seen.at(-1)!;
  t.equal(s.url, '/admin/update/apply');
  t.equal(s.headers['x-engine-deploy-token'], token, 'the deploy token, byte for byte');
  t.equal(s.headers['x-engine-stepup'], 'cfs_s', 'beside the step-up proof');
  t.same(JSON.parse(s.body.toString('utf8')), { dryRun: false });

  // ramp/settle carries it too; a request without it reaches the engine without it.
  await (
    await fetch(`${url}/admin/update/ramp/settle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-engine-deploy-token': token },
      body: '{"verdict":"alive"}',
    })
  ).arrayBuffer();
  t.equal(up.seen.at(-1)!.headers['x-engine-deploy-token'], token, 'ramp/settle: forwarded');
  await (
    await fetch(`${url}/admin/update/apply`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
  ).arrayBuffer();
  t.equal(up.seen.at(-1)!.headers['x-engine-deploy-token'], undefined, 'none added when absent');

  // A CORS preflight naming the header reaches the engine, which answers for its own origin.
  await (
    await fetch(`${url}/admin/update/apply`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://console.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-engine-deploy-token',
      },
    })
  ).arrayBuffer();
  const pre = up.seen.at(-1)!;
  t.equal(pre.method, 'OPTIONS');
  t.equal(pre.headers['access-control-request-headers'], 'content-type,x-engine-deploy-token');
});

t.test('single sign-on routes: redirects, cookies and the SAML form post pass through', async (t) => {
  // The engine's pre-auth SSO routes answer 302 with Set-Cookie: the console must not follow the
  // redirect, rewrite its Location or drop a cookie, and must pass a form-encoded ACS post as is.
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
    if (req.url === '/admin/oidc/providers') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          providers: [{ id: 'acme', kind: 'oidc', displayName: 'Acme', startUrl: '/admin/oidc/start/acme' }],
        }),
      );
      return;
    }
    if (req.url?.startsWith('/admin/oidc/start/')) {
      res.setHeader(
        'set-cookie',
        '__Host-engine_oidc=tx; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=600',
      );
      res.writeHead(302, { location: 'https://idp.example/authorize?client_id=c&state=s&redirect_uri=x' });
      res.end();
      return;
    }
    res.setHeader('set-cookie', [
      '__Host-engine_oidc=; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=0',
      '__Host-engine_session=s1; Path=/; Secure; HttpOnly; SameSite=Strict',
      '__Host-engine_csrf=c1; Path=/; Secure; SameSite=Strict',
    ]);
    res.writeHead(302, { location: req.url?.includes('bad') ? '/?saml=failed' : '/' });
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const app = await buildConsole(
    loadConsoleConfig({
      CONSOLE_ENGINE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      CONSOLE_UI_DIR: UI_DIR,
      CONSOLE_LOG_LEVEL: 'silent',
    }),
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());

  const providers = await fetch(`${url}/admin/oidc/providers`);
  t.equal(providers.status, 200, 'the provider list is forwarded without a session');
  t.equal((await providers.json()).providers[0].startUrl, '/admin/oidc/start/acme');

  const start = await fetch(`${url}/admin/oidc/start/acme`, { redirect: 'manual' });
  t.equal(start.status, 302, 'the redirect is passed back, not followed');
  t.equal(
    start.headers.get('location'),
    'https://idp.example/authorize?client_id=c&state=s&redirect_uri=x',
    'Location unchanged',
  );
  t.same(
    start.headers.getSetCookie(),
    ['__Host-engine_oidc=tx; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=600'],
    'the transaction cookie unchanged',
  );

  const back = await fetch(
    `${url}/admin/oidc/callback/acme?code=c0de&state=s&iss=https%3A%2F%2Fidp.example`,
    {
      redirect: 'manual',
      headers: { cookie: '__Host-engine_oidc=tx' },
    },
  );
  t.equal(back.status, 302);
  t.equal(back.headers.get('location'), '/');
  t.equal(back.headers.getSetCookie().length, 3, 'every Set-Cookie of the callback');
  const cb = seen.at(-1)!;
  t.equal(
    cb.url,
    '/admin/oidc/callback/acme?code=c0de&state=s&iss=https%3A%2F%2Fidp.example',
    'query as sent',
  );
  t.equal(cb.headers.cookie, '__Host-engine_oidc=tx', 'the transaction cookie reaches the engine');

  const form = `SAMLResponse=${encodeURIComponent('PHNhbWxwOlJlc3BvbnNlPg+/=='.repeat(2000))}&RelayState=r%2Bs`;
  for (const [path, location] of [
    ['/admin/saml/acs/acme', '/'],
    ['/admin/saml/acs/bad', '/?saml=failed'],
  ] as const) {
    const acs = await fetch(`${url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://idp.example' },
      body: form,
    });
    t.equal(acs.status, 302, `${path}: the ACS answer`);
    t.equal(acs.headers.get('location'), location);
    const post = seen.at(-1)!;
    t.equal(post.method, 'POST');
    t.equal(post.headers['content-type'], 'application/x-www-form-urlencoded');
    t.equal(post.headers.origin, 'https://idp.example', "the IdP's Origin unchanged");
    t.equal(post.body.toString('utf8'), form, `${path}: the form body byte for byte (${form.length} bytes)`);
  }
  const meta = await fetch(`${url}/admin/saml/metadata/acme`);
  await meta.arrayBuffer();
  t.equal(seen.at(-1)?.url, '/admin/saml/metadata/acme', 'SP metadata is forwarded');
});

t.test('the UI: CSP, screen paths, assets, no engine headers', async (t) => {
  const up = await upstream(t);
  const app = await buildConsole(
    loadConsoleConfig({ CONSOLE_ENGINE_URL: up.url, CONSOLE_UI_DIR: UI_DIR, CONSOLE_LOG_LEVEL: 'silent' }),
  );
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.teardown(() => app.close());
  for (const path of ['/', '/jobs', '/jobs/nightly', '/restore']) {
    const r = await fetch(`${url}${path}`);
    t.equal(r.status, 200, `${path} serves the page`);
    const html = await r.text();
    t.match(html, /<div id="root"><\/div>/);
    t.notMatch(html, /<script>(?!<)/, 'no inline script in the page');
    const csp = r.headers.get('content-security-policy') ?? '';
    t.match(csp, /script-src 'self'/);
    t.notMatch(csp, /unsafe-inline|unsafe-eval/, 'no unsafe-inline or unsafe-eval');
    t.match(csp, /frame-ancestors 'none'/);
    t.equal(r.headers.get('x-content-type-options'), 'nosniff');
    t.equal(r.headers.get('cache-control'), 'no-cache');
  }
  const html = await (await fetch(`${url}/`)).text();
  const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
  t.ok(asset, 'the page loads a hashed bundle');
  const a = await fetch(`${url}${asset}`);
  t.equal(a.status, 200);
  t.match(a.headers.get('content-type') ?? '', /javascript/);
  t.match(a.headers.get('cache-control') ?? '', /immutable/);
  t.ok((await a.arrayBuffer()).byteLength > 1000, 'the bundle has content');
  t.equal(up.seen.length, 0, 'serving the UI never calls the engine');
});

t.test('configuration errors name the variable', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{}, 'CONSOLE_ENGINE_URL'],
    [{ CONSOLE_ENGINE_URL: 'not a url' }, 'CONSOLE_ENGINE_URL'],
    [{ CONSOLE_ENGINE_URL: 'ftp://127.0.0.1' }, 'CONSOLE_ENGINE_URL'],
    [{ CONSOLE_ENGINE_URL: 'http://u:p@127.0.0.1' }, 'CONSOLE_ENGINE_URL'],
    [{ CONSOLE_ENGINE_URL: 'http://127.0.0.1/admin' }, 'CONSOLE_ENGINE_URL'],
    [{ CONSOLE_ENGINE_URL: 'http://127.0.0.1', CONSOLE_PORT: '70000' }, 'CONSOLE_PORT'],
    [
      { CONSOLE_ENGINE_URL: 'http://127.0.0.1', CONSOLE_TLS_CERT_FILE: '/nonexistent' },
      'CONSOLE_TLS_CERT_FILE',
    ],
  ];
  for (const [env, variable] of cases) {
    t.throws(
      () => loadConsoleConfig(env),
      { name: 'ConsoleConfigError', variable },
      `${JSON.stringify(env)} -> ${variable}`,
    );
  }
  t.ok(new ConsoleConfigError('X', 'y') instanceof Error);
  const c = loadConsoleConfig({ CONSOLE_ENGINE_URL: 'http://127.0.0.1:8787' });
  t.equal(c.port, 8788);
  t.equal(c.host, '127.0.0.1');
});

t.test('no screen path lies inside a proxied family', async (t) => {
  // A reload or a bookmark of a screen must reach the UI, never the engine.
  const source = (await import('node:fs')).readFileSync(
    new URL('../src/ui/routes.tsx', import.meta.url),
    'utf8',
  );
  const paths = [...source.matchAll(/path: '([^']+)'/g)].map((m) => m[1]!);
  t.ok(paths.length >= 10, 'the screens were read');
  for (const path of paths)
    for (const prefix of PROXIED_PREFIXES)
      t.notOk(path === prefix || path.startsWith(`${prefix}/`), `${path} is not under ${prefix}`);
});

t.test('the request cannot choose the upstream', async (t) => {
  // An absolute-form target or a forged Host never points the console at another host: the
  // upstream is CONSOLE_ENGINE_URL alone.
  const up = await upstream(t);
  const app = await buildConsole(
    loadConsoleConfig({ CONSOLE_ENGINE_URL: up.url, CONSOLE_UI_DIR: UI_DIR, CONSOLE_LOG_LEVEL: 'silent' }),
  );
  const url = new URL(await app.listen({ host: '127.0.0.1', port: 0 }));
  t.teardown(() => app.close());
  const { connect } = await import('node:net');
  const raw = (request: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), '127.0.0.1', () => socket.write(request));
      let out = '';
      socket.on('data', (c) => {
        out += String(c);
      });
      socket.on('end', () => resolve(out));
      socket.on('error', reject);
    });
  const absolute = await raw(
    'GET http://203.0.113.5:9/admin/jobs HTTP/1.1\r\nHost: 203.0.113.5:9\r\nConnection: close\r\n\r\n',
  );
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(absolute)?.[1]);
  t.ok(
    status === 201 || status === 400 || status === 404,
    `answered locally or by the configured engine (${status})`,
  );
  for (const s of up.seen)
    t.notMatch(s.url, /203\.0\.113\.5/, 'the upstream never sees another host in the path');
  const before = up.seen.length;
  const forgedHost = await raw(
    'GET /admin/jobs HTTP/1.1\r\nHost: 203.0.113.5:9\r\nConnection: close\r\n\r\n',
  );
  t.match(forgedHost, /^HTTP\/1\.1 201/, 'a forged Host still reaches the configured engine');
  t.equal(up.seen.length, before + 1);
  t.equal(up.seen.at(-1)?.headers.host, new URL(up.url).host, 'with the engine as Host');
});
