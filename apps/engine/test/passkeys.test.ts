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

    // Invites: an owner invites bob as operator; checked at begin, used up at finish.
    const invite = await http(`${engine.url}/admin/roles/invite`, {
      headers: { cookie: session, origin: CONSOLE },
      body: { email: 'Bob@Example.org', role: 'operator' },
    });
    t.equal(invite.status, 200, invite.text);
    const inviteToken: string = invite.json().inviteToken;
    t.match(inviteToken, /^cfi_/);
    t.equal(
      (await auth('register/begin', { email: 'eve@example.org', inviteToken })).status,
      401,
      'bound to its email',
    );
    t.equal(
      (await auth('register/begin', { email: 'bob@example.org', inviteToken: 'cfi_nope.nope' })).status,
      401,
    );
    const abandoned = await auth('register/begin', { email: 'bob@example.org', inviteToken });
    t.equal(abandoned.status, 200, 'an abandoned ceremony leaves the invite usable');
    const bobKey = new SoftAuthenticator(CONSOLE, RP_ID);
    const bobBegin = await auth('register/begin', { email: 'bob@example.org', inviteToken });
    t.equal(bobBegin.status, 200, bobBegin.text);
    const bobDone = await auth('register/finish', { credential: bobKey.register(bobBegin.json().challenge) });
    t.equal(bobDone.status, 200, bobDone.text);
    const bobCookie = cookieOf(bobDone.headers, SESSION_COOKIE)!;
    const bobWho = (await http(`${engine.url}/admin/whoami`, { headers: { cookie: bobCookie } })).json();
    t.match(bobWho, { subject: 'passkey:bob@example.org', role: 'operator' });
    t.equal((await auth('register/begin', { email: 'bob@example.org', inviteToken })).status, 401, 'used up');
    const notOwner = await http(`${engine.url}/admin/roles/invite`, {
      headers: { cookie: bobCookie, origin: CONSOLE },
      body: { email: 'carl@example.org' },
    });
    t.equal(notOwner.status, 403, 'only an owner invites');

    // Recovery codes: staged at registration, usable only once confirmed, each used once. The
    // self-add above staged a newer set, which replaced the first registration's unconfirmed one.
    const codes: string[] = selfDone.json().recoveryCodes;
    t.equal(
      (
        await auth(
          'recovery',
          { email: 'root@example.org', code: done.json().recoveryCodes[0] },
          { origin: CONSOLE },
        )
      ).status,
      401,
    );
    const withOrigin = { origin: CONSOLE };
    const recover = (code: string, email = 'root@example.org') =>
      auth('recovery', { email, code }, withOrigin);
    t.equal((await recover(codes[0]!)).status, 401, 'staged codes do not work yet');
    t.equal((await auth('recovery-codes/confirm', {}, { cookie: session })).status, 403, 'Origin checked');
    const confirm = await auth('recovery-codes/confirm', {}, { cookie: session, ...withOrigin });
    t.same([confirm.status, confirm.json()], [200, { ok: true, promoted: true }]);
    t.same((await auth('recovery-codes/confirm', {}, { cookie: session, ...withOrigin })).json(), {
      ok: true,
      promoted: false,
    });
    const bare = await auth('recovery-codes/regenerate', {}, { ...bearer(), ...withOrigin });
    t.equal(bare.status, 403, 'the bare token has no recovery codes');
    const rec = await recover(codes[0]!.toLowerCase());
    t.equal(rec.status, 200, rec.text);
    t.same(rec.json(), { ok: true, email: 'root@example.org', codesLeft: 9 });
    t.notOk(JSON.stringify(rec.json()).includes('ey'), 'no session in the body');
    const recCookie = cookieOf(rec.headers, SESSION_COOKIE)!;
    const recWho = (await http(`${engine.url}/admin/whoami`, { headers: { cookie: recCookie } })).json();
    t.match(recWho, { sessionKind: 'recovery', role: 'owner' });
    t.equal((await recover(codes[0]!)).status, 401, 'a code works once');
    t.equal((await recover(codes[1]!, 'eve@example.org')).status, 401, 'codes are per person');
    // Regenerate: a new staged set; the old one stays until confirmed.
    const regen = await auth('recovery-codes/regenerate', {}, { cookie: session, ...withOrigin });
    t.equal(regen.status, 200, regen.text);
    t.equal(regen.json().recoveryCodes.length, 10);
    t.equal((await recover(regen.json().recoveryCodes[0])).status, 401, 'not before confirm');
    // Guessing: after five failures for one email even a right code waits (429 with Retry-After).
    t.equal((await recover('AAAA-AAAA-AAAA-AAAA-AAAA')).status, 401, 'the fifth failure');
    const limited = await recover(codes[2]!);
    t.equal(limited.status, 429, 'per-email limit');
    t.match(limited.headers.get('retry-after'), /^\d+$/);
    t.equal(limited.json().error, 'rate limited');

    // Audited.
    const feed = await http(`${engine.url}/admin/audit?limit=50`, { headers: bearer() });
    t.equal(feed.status, 200, feed.text);
    const actions = JSON.stringify(feed.json());
    t.match(actions, /first-owner-claim/);
    t.match(actions, /passkey-register/);
    t.match(actions, /recovery-sign-in/);
    t.match(actions, /recovery-codes-confirm/);
    for (const code of [done.json().recoveryCodes[0], codes[0]!]) {
      t.notOk(actions.includes(code), 'no recovery code in the audit log');
      t.notOk(engine.logs.join('\n').includes(code), 'no recovery code in the logs');
    }
  });
}
