// Passkeys in a real browser: Debian's Chromium (playwright-core, executablePath) with the DevTools
// WebAuthn virtual authenticator registers the first owner and signs in against a started engine,
// from a page served at CONSOLE_ORIGIN on loopback (a small same-origin proxy to the engine, as the
// console will be). The cookie it gets then works for reads and, with the right Origin, for writes;
// logout ends it.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromiumPath, postgresUrl } from '@coffer/testkit';
import { chromium } from 'playwright-core';
import t from 'tap';
import { ADMIN_TOKEN, startEngine } from './helpers/engine.ts';

const PAGE = `<!doctype html><meta charset="utf-8"><title>Coffer test console</title>
<script>
async function post(path, body, headers = {}) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body ?? {}) });
  return { status: r.status, body: await r.text() };
}
async function register(email, bearer) {
  const begin = await post('/admin/auth/register/begin', { email }, bearer ? { authorization: 'Bearer ' + bearer } : {});
  if (begin.status !== 200) return { step: 'begin', ...begin };
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(JSON.parse(begin.body));
  const credential = await navigator.credentials.create({ publicKey });
  return { step: 'finish', ...(await post('/admin/auth/register/finish', { credential: credential.toJSON() })) };
}
async function login(email) {
  const begin = await post('/admin/auth/login/begin', { email });
  if (begin.status !== 200) return { step: 'begin', ...begin };
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(JSON.parse(begin.body));
  const credential = await navigator.credentials.get({ publicKey });
  return { step: 'finish', ...(await post('/admin/auth/login/finish', { credential: credential.toJSON() })) };
}
async function whoami() {
  const r = await fetch('/admin/whoami');
  return { status: r.status, body: await r.text() };
}
</script>`;

/** Serves the page and forwards /admin/* to the engine (same origin for the browser, as the console). */
function consoleServer(engineUrl: string) {
  return createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url?.startsWith('/admin/')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(PAGE);
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === 'string' && k !== 'host' && k !== 'connection' && k !== 'content-length')
        headers[k] = v;
    const r = await fetch(`${engineUrl}${req.url}`, {
      method: req.method,
      headers,
      ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    });
    const out: Record<string, string | string[]> = {};
    r.headers.forEach((v, k) => {
      if (
        k !== 'set-cookie' &&
        k !== 'content-length' &&
        k !== 'content-encoding' &&
        k !== 'transfer-encoding'
      )
        out[k] = v;
    });
    const cookies = r.headers.getSetCookie();
    if (cookies.length > 0) out['set-cookie'] = cookies;
    res.writeHead(r.status, out);
    res.end(Buffer.from(await r.arrayBuffer()));
  });
}

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`a passkey registered and used in Chromium (${backend})`, async (t) => {
    // The console's port first: CONSOLE_ORIGIN names it.
    let engineUrl = '';
    const server = createServer((req, res) => forward(req, res));
    let forward: (req: IncomingMessage, res: ServerResponse) => void = () => {};
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const origin = `http://localhost:${(server.address() as AddressInfo).port}`;
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: origin,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    engineUrl = engine.url;
    const proxy = consoleServer(engineUrl);
    forward = (req, res) => proxy.emit('request', req, res);

    const browser = await chromium.launch({
      executablePath: chromiumPath(),
      args: ['--no-sandbox'],
      headless: true,
    });
    t.teardown(() => browser.close());
    const context = await browser.newContext();
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
      },
    });
    await page.goto(`${origin}/`);

    const reg = await page.evaluate(
      ([token]) =>
        (globalThis as never as { register: (e: string, b: string) => Promise<unknown> }).register(
          'owner@example.org',
          token!,
        ),
      [ADMIN_TOKEN],
    );
    const registered = reg as { step: string; status: number; body: string };
    t.equal(
      registered.status,
      200,
      registered.status === 200 ? 'registered in the browser' : registered.body,
    );
    t.match(JSON.parse(registered.body), { ok: true, role: 'owner', recoveryCodesPending: true });

    const call = (fn: string, arg?: string) =>
      page.evaluate(
        ([f, a]) =>
          (globalThis as never as Record<string, (x?: string) => Promise<{ status: number; body: string }>>)[
            f!
          ]!(a),
        [fn, arg],
      );
    const who = await call('whoami');
    t.equal(who.status, 200, 'whoami with the cookie');
    t.match(JSON.parse(who.body), {
      method: 'session',
      sessionKind: 'passkey',
      role: 'owner',
      subject: 'passkey:owner@example.org',
    });
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === '__Host-engine_session');
    t.ok(session, 'the browser kept the session cookie');
    t.equal(session?.httpOnly, true);
    t.equal(session?.sameSite, 'Strict');

    // A write from the page: the browser sends Origin = CONSOLE_ORIGIN.
    const write = await page.evaluate(() =>
      fetch('/admin/jobs', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          id: 'from-the-browser',
          cadenceSeconds: 3600,
          source: { type: 'files', path: '/srv/data' },
        }),
      }).then(async (r) => ({ status: r.status, body: await r.text() })),
    );
    t.equal(write.status, 200, write.status === 200 ? 'a write from the console origin' : write.body);

    // Logout, then sign in again with the passkey.
    const out = await page.evaluate(() =>
      fetch('/admin/auth/logout', { method: 'POST' }).then((r) => r.status),
    );
    t.equal(out, 200);
    t.equal((await call('whoami')).status, 401, 'signed out');
    const login = await call('login', 'owner@example.org');
    t.equal(login.status, 200, login.status === 200 ? 'signed in with the passkey' : login.body);
    t.equal((await call('whoami')).status, 200, 'signed in again');
  });
