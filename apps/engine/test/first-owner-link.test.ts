// The first owner by email: POST /admin/auth/bootstrap/send mails a set-up link to the
// deploy-pinned address through a real SMTP listener on loopback (smtp-server); the test follows
// the link (its token) to register a passkey as the first owner. Always a generic 200; a new
// request replaces the previous link; the link works once, only for the pinned address, and
// never after a first owner exists; rate-limited per address.
import type { AddressInfo } from 'node:net';
import { SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, SoftAuthenticator } from '@coffer/testkit';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';
const PINNED = 'root@example.org';
const MARKER_PASSWORD = 'MARKER-smtp-password-5e1d';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`the emailed first-owner link (${backend})`, async (t) => {
    const inbox: { to: string[]; text: string }[] = [];
    const logins: string[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      allowInsecureAuth: true,
      disabledCommands: ['STARTTLS'],
      onAuth(auth, _session, callback) {
        logins.push(`${auth.username}:${auth.password}`);
        callback(null, { user: auth.username });
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          inbox.push({
            to: session.envelope.rcptTo.map((r) => r.address),
            text: Buffer.concat(chunks).toString('utf8'),
          });
          callback();
        });
      },
    });
    await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
    t.teardown(() => new Promise<void>((r) => smtp.close(() => r())));
    const port = (smtp.server.address() as AddressInfo).port;
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ENGINE_SMTP_URL: `smtp://127.0.0.1:${port}`,
      ENGINE_MAIL_FROM: 'coffer@example.org',
      ENGINE_FIRST_OWNER_EMAIL: PINNED,
      ENGINE_SMTP_USERNAME: 'coffer',
      ENGINE_SMTP_PASSWORD: MARKER_PASSWORD,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const auth = (path: string, body: unknown) => http(`${engine.url}/admin/auth/${path}`, { body });
    const send = () => http(`${engine.url}/admin/auth/bootstrap/send`, { method: 'POST' });
    const waitMail = async (n: number) => {
      for (let i = 0; i < 200 && inbox.length < n; i++) await new Promise((r) => setTimeout(r, 25));
      t.equal(inbox.length, n, `${n} message(s) delivered`);
      return inbox[n - 1]!;
    };
    /** A message body with its quoted-printable encoding undone (soft breaks, =XX escapes). */
    const decoded = (text: string) =>
      text
        .replace(/=\r?\n/g, '')
        .replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
    /** The set-up token in a message. */
    const tokenIn = (text: string) => /#setup=(cfo_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)/.exec(decoded(text))?.[1];

    const first = await send();
    t.same([first.status, first.json()], [200, { ok: true }]);
    const m1 = await waitMail(1);
    t.same(m1.to, [PINNED], 'only to the pinned address');
    const oldToken = tokenIn(m1.text);
    t.ok(oldToken, 'the message carries the link');
    t.match(decoded(m1.text), `${CONSOLE}/#setup=cfo_`);

    // A new request replaces the previous link.
    await send();
    const token = tokenIn((await waitMail(2)).text)!;
    t.not(token, oldToken);
    t.equal(
      (await auth('register/begin', { email: PINNED, setupToken: oldToken })).status,
      401,
      'the replaced link',
    );
    t.equal(
      (await auth('register/begin', { email: 'eve@example.org', setupToken: token })).status,
      401,
      'another address',
    );

    // Follow the link: register a passkey as the first owner.
    const key = new SoftAuthenticator(CONSOLE, 'console.coffer.test');
    const abandoned = await auth('register/begin', { email: PINNED, setupToken: token });
    t.equal(abandoned.status, 200, 'an abandoned ceremony leaves the link usable');
    const begin = await auth('register/begin', { email: PINNED, setupToken: token });
    t.equal(begin.status, 200, begin.text);
    const done = await auth('register/finish', { credential: key.register(begin.json().challenge) });
    t.equal(done.status, 200, done.text);
    t.match(done.json(), { ok: true, email: PINNED, role: 'owner', recoveryCodesPending: true });
    const cookie = done.headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))!
      .split(';')[0]!;
    t.match((await http(`${engine.url}/admin/whoami`, { headers: { cookie } })).json(), { role: 'owner' });

    // Used up; and once an owner exists no new link goes out (still the same generic answer).
    t.equal((await auth('register/begin', { email: PINNED, setupToken: token })).status, 401, 'works once');
    const after = await send();
    t.same([after.status, after.json()], [200, { ok: true }]);
    await new Promise((r) => setTimeout(r, 300));
    t.equal(inbox.length, 2, 'no link after the first owner exists');

    // Per-address limit: five sends an hour (three used above).
    await send();
    await send();
    const limited = await send();
    t.equal(limited.status, 429);
    t.match(limited.headers.get('retry-after'), /^\d+$/);
    t.notOk(engine.logs.join('\n').includes(token), 'the link never reaches the logs');
    t.same(logins[0], `coffer:${MARKER_PASSWORD}`, 'the engine signed in to the mail server');
    t.notOk(engine.logs.join('\n').includes(MARKER_PASSWORD), 'the SMTP password never reaches the logs');
    const feed = JSON.stringify(
      (await http(`${engine.url}/admin/audit?limit=50`, { headers: { cookie } })).json(),
    );
    t.notOk(feed.includes(MARKER_PASSWORD), 'nor the audit log');
    t.match(feed, /ENGINE_SMTP_PASSWORD/, 'its presence (never its value) is recorded');
  });
