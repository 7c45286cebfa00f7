// GET /admin/signin-factors: a person sees their own passkeys (id, transports, created, last used;
// never the public key or counter) and the recovery codes left; the admin token and token
// sessions have none (400).
import { SESSION_COOKIE } from '@coffer/identity';
import { SoftAuthenticator } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

t.test("the caller's own sign-in factors", async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE });
  const admin = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    http(`${engine.url}/admin/${path}`, { headers, body });
  const key = new SoftAuthenticator(CONSOLE, 'console.coffer.test');
  const begin = await admin('auth/register/begin', { email: 'me@example.org' }, bearer());
  const done = await admin('auth/register/finish', { credential: key.register(begin.json().challenge) });
  t.equal(done.status, 200, done.text);
  const cookie = done.headers
    .getSetCookie()
    .find((c) => c.startsWith(SESSION_COOKIE))!
    .split(';')[0]!;
  t.equal((await admin('auth/recovery-codes/confirm', {}, { cookie, origin: CONSOLE })).status, 200);

  const mine = await http(`${engine.url}/admin/signin-factors`, { headers: { cookie } });
  t.equal(mine.status, 200, mine.text);
  const body = mine.json();
  t.equal(body.passkeys.length, 1);
  t.same(Object.keys(body.passkeys[0]).sort(), ['createdAt', 'id', 'transports', 'usedAt']);
  t.equal(body.passkeys[0].id, key.id);
  t.equal(body.recoveryCodesLeft, 10);
  t.notMatch(mine.text, /publicKey|counter/, 'no key material or counter');

  const token = await http(`${engine.url}/admin/signin-factors`, { headers: bearer() });
  t.equal(token.status, 400);
  t.match(token.json().error, /belong to a person/);
});
