// Passkey routes through HTTP against a started engine, on SQLite and on PostgreSQL, with a
// software authenticator (real ES256 signatures and WebAuthn byte layouts): the first owner claimed
// with the admin bearer, recovery codes staged and shown once, the session it gets, sign-in,
// replayed answers, the wrong origin, a counter regression, self-add, and 501 without CONSOLE_ORIGIN.
import { CSRF_COOKIE, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, SoftAuthenticator } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';
const RP_ID = 'console.coffer.test';

const cookieOf = (headers: Headers, name: string) =>
  headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];

t.test('without CONSOLE_ORIGIN every ceremony answers 501', async (t) => {
  const engine = await startEngine(t, {});
  for (const path of ['register/begin', 'register/finish', 'login/begin', 'login/finish']) {
    const r = await http(`${engine.url}/admin/auth/${path}`, {
      headers: bearer(),
      body: { email: 'a@b.io' },
    });
    t.equal(r.status, 501, path);
    t.same(r.json(), { ok: false, reason: 'passkey_not_configured' });
  }
});

for (const backend of ['sqlite', 'postgres'] as const) {
  t.test(`passkeys on ${backend}`, async (t) => {
    const env: Record<string, string> = { CONSOLE_ORIGIN: CONSOLE };
    if (backend === 'postgres') env.ENGINE_DATABASE_URL = await postgresUrl();
    const engine = await startEngine(t, env);
    const auth = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      http(`${engine.url}/admin/auth/${path}`, { headers, body });
    const key = new SoftAuthenticator(CONSOLE, RP_ID);

    // Registration needs a proven path: no bearer, no session -> 401.
    t.equal((await auth('register/begin', { email: 'root@example.org' })).status, 401);
    t.equal((await auth('register/begin', { email: 'nope' }, bearer())).status, 400, 'not an email');

    // Bootstrap: the admin bearer while the role table is empty claims the first owner.
    const begin = await auth('register/begin', { email: 'Root@Example.org' }, bearer());
    t.equal(begin.status, 200, begin.text);
    const options = begin.json();
    t.equal(options.rp.id, RP_ID, 'the relying party comes from CONSOLE_ORIGIN');
    t.equal(options.authenticatorSelection.userVerification, 'required');
    const answer = key.register(options.challenge);
    const done = await auth('register/finish', { credential: answer });
    t.equal(done.status, 200, done.text);
    t.match(done.json(), {
      ok: true,
      email: 'root@example.org',
      subject: 'passkey:root@example.org',
      role: 'owner',
      recoveryCodesPending: true,
    });
    t.equal(done.json().recoveryCodes.length, 10, 'ten recovery codes, shown once');
    const session = cookieOf(done.headers, SESSION_COOKIE)!;
    t.ok(session && cookieOf(done.headers, CSRF_COOKIE), 'signed in');
    const who = (await http(`${engine.url}/admin/whoami`, { headers: { cookie: session } })).json();
    t.match(who, {
      method: 'session',
      sessionKind: 'passkey',
      subject: 'passkey:root@example.org',
      role: 'owner',
    });
    t.equal(who.roleSource, 'assigned');

    // The same answer again: its challenge was used.
    t.equal((await auth('register/finish', { credential: answer })).status, 401, 'replayed registration');
    // The bearer cannot claim a second owner.
    const second = await auth('register/begin', { email: 'mallory@example.org' }, bearer());
    t.equal(second.status, 403);
    t.same(second.json(), { ok: false, reason: 'first owner already claimed' });

    // Sign in.
    const signIn = async (tweaks: Parameters<SoftAuthenticator['authenticate']>[1] = {}) => {
      const b = await auth('login/begin', { email: 'root@example.org' });
      t.equal(b.status, 200, b.text);
      t.same(
        b.json().allowCredentials.map((c: { id: string }) => c.id),
        [key.id],
      );
      const a = key.authenticate(b.json().challenge, tweaks);
      return { answer: a, reply: await auth('login/finish', { credential: a }) };
    };
    const ok = await signIn();
    t.equal(ok.reply.status, 200, ok.reply.text);
    t.match(ok.reply.json(), { ok: true, email: 'root@example.org' });
    t.ok(cookieOf(ok.reply.headers, SESSION_COOKIE), 'cookie on verified success');
    const replay = await auth('login/finish', { credential: ok.answer });
    t.equal(replay.status, 401, 'replayed sign-in');
    t.notOk(cookieOf(replay.headers, SESSION_COOKIE), 'no cookie on a refusal');
    t.equal((await signIn({ origin: 'https://evil.coffer.test' })).reply.status, 401, 'wrong origin');
    t.equal((await signIn({ rpId: 'evil.coffer.test' })).reply.status, 401, 'wrong RP id');
    t.equal((await signIn({ counter: 1 })).reply.status, 401, 'counter regression (a clone)');
    t.equal((await signIn({ uv: false })).reply.status, 401, 'no user verification');
    const stranger = new SoftAuthenticator(CONSOLE, RP_ID);
    const b = await auth('login/begin', { email: 'root@example.org' });
    t.equal(
      (await auth('login/finish', { credential: stranger.authenticate(b.json().challenge) })).status,
      401,
    );
    t.equal((await signIn()).reply.status, 200, 'the genuine authenticator still works');

    // Self-add: signed in, a second passkey for one's own email.
    const spare = new SoftAuthenticator(CONSOLE, RP_ID);
    const selfBegin = await auth('register/begin', { email: 'root@example.org' }, { cookie: session });
    t.equal(selfBegin.status, 200, selfBegin.text);
    t.same(
      selfBegin.json().excludeCredentials.map((c: { id: string }) => c.id),
      [key.id],
      'the existing passkey is excluded',
    );
    const selfDone = await auth('register/finish', {
      credential: spare.register(selfBegin.json().challenge),
    });
    t.equal(selfDone.status, 200, selfDone.text);
    t.equal(selfDone.json().role, undefined, 'self-add grants nothing');
    // A session cannot add a passkey to someone else's email.
    t.equal((await auth('register/begin', { email: 'eve@example.org' }, { cookie: session })).status, 401);

    // Audited.
    const feed = await http(`${engine.url}/admin/audit?limit=50`, { headers: bearer() });
    t.equal(feed.status, 200, feed.text);
    const actions = JSON.stringify(feed.json());
    t.match(actions, /first-owner-claim/);
    t.match(actions, /passkey-register/);
    t.notOk(actions.includes(done.json().recoveryCodes[0]), 'no recovery code in the audit log');
    t.notOk(engine.logs.join('\n').includes(done.json().recoveryCodes[0]), 'no recovery code in the logs');
  });
}
