// Session tokens and cookies: what a token carries (never a role), every way a token is refused,
// revocation by epoch, not-before and id, and the cookie, Origin and double-submit checks.
import { SignJWT } from 'jose';
import t from 'tap';
import {
  CSRF_COOKIE,
  clearedCookies,
  csrfCookie,
  csrfTokenFor,
  csrfTokenValid,
  isIdentityError,
  mintSession,
  newSessionKey,
  originCheck,
  readCookie,
  recentlyAuthenticated,
  SESSION_COOKIE,
  SESSION_TOKEN_TYPE,
  sessionCookie,
  sessionRevoked,
  verifySession,
} from '../src/index.ts';

const NOW = Date.UTC(2026, 10, 25, 9, 0, 0);

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    if (!isIdentityError(e, 'ERR_IDENTITY_SESSION_INVALID')) throw e;
    t.notMatch(e.message, /eyJ/, 'the message never echoes the token');
    return e.refusal ?? 'no refusal';
  }
}

t.test('a minted session verifies and carries identity, never a role', async (t) => {
  const key = newSessionKey();
  const { token, claims } = await mintSession(key, {
    subject: 'passkey:ada@example.org',
    email: 'ada@example.org',
    method: 'passkey',
    epoch: 3,
    now: NOW,
  });
  t.equal(claims.expiresAt - claims.issuedAt, 8 * 3600, 'default lifetime: 8 hours');
  t.equal(claims.authAt, claims.issuedAt);
  const back = await verifySession(key, token, { now: NOW + 1000 });
  t.same(back, claims);
  const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
  t.notOk('role' in payload, 'no role in the token');
  t.same(Object.keys(payload).sort(), ['auth_at', 'email', 'epoch', 'exp', 'iat', 'method', 'sid', 'sub']);
  const header = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString());
  t.same(header, { alg: 'HS256', typ: SESSION_TOKEN_TYPE });
});

t.test('a token session has no subject and lasts an hour by default', async (t) => {
  const key = newSessionKey();
  const { token, claims } = await mintSession(key, {
    subject: null,
    email: null,
    method: 'token',
    epoch: 0,
    now: NOW,
  });
  t.equal(claims.expiresAt - claims.issuedAt, 3600);
  t.same(await verifySession(key, token, { now: NOW }), claims);
  await t.rejects(mintSession(key, { subject: 'x', email: null, method: 'token', epoch: 0 }), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });
  await t.rejects(mintSession(key, { subject: null, email: null, method: 'passkey', epoch: 0 }), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });
});

t.test('every refusal has its reason: tampered, other key, expired, future, wrong type, junk', async (t) => {
  const key = newSessionKey();
  const { token } = await mintSession(key, {
    subject: 'passkey:ada@example.org',
    email: 'ada@example.org',
    method: 'passkey',
    epoch: 0,
    ttlSeconds: 600,
    now: NOW,
  });
  const [h, p, s] = token.split('.') as [string, string, string];
  const forged = JSON.parse(Buffer.from(p, 'base64url').toString());
  forged.sub = 'passkey:owner@example.org';
  const swapped = `${h}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${s}`;
  t.equal(await refusal(verifySession(key, swapped, { now: NOW })), 'bad-signature', 'payload changed');
  t.equal(await refusal(verifySession(newSessionKey(), token, { now: NOW })), 'bad-signature', 'another key');
  t.equal(await refusal(verifySession(key, token, { now: NOW + 601_000 })), 'expired');
  t.equal(await refusal(verifySession(key, token, { now: NOW + 599_000 })), 'accepted');
  const otherType = await new SignJWT({ sid: 'x', email: null, method: 'token', auth_at: 1, epoch: 0 })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(NOW / 1000)
    .setExpirationTime(NOW / 1000 + 60)
    .sign(key);
  t.equal(await refusal(verifySession(key, otherType, { now: NOW })), 'malformed', 'not a session token');
  const noneAlg = `${Buffer.from('{"alg":"none","typ":"coffer-session+jwt"}').toString('base64url')}.${p}.`;
  t.equal(await refusal(verifySession(key, noneAlg, { now: NOW })), 'malformed', 'alg none');
  for (const junk of ['', 'x', 'a.b.c', 'x'.repeat(5000)])
    t.equal(
      await refusal(verifySession(key, junk, { now: NOW })),
      'malformed',
      JSON.stringify(junk.slice(0, 10)),
    );
  await t.rejects(
    verifySession(new Uint8Array(8), token),
    { code: 'ERR_IDENTITY_INVALID_ARGUMENT' },
    'short key',
  );
});

t.test('revocation: another epoch, issued before not-before, or ended by id', async (t) => {
  const key = newSessionKey();
  const { claims } = await mintSession(key, {
    subject: 'passkey:ada@example.org',
    email: 'ada@example.org',
    method: 'passkey',
    epoch: 2,
    now: NOW,
  });
  const at = NOW / 1000;
  t.equal(sessionRevoked(claims, { epoch: 2, notBefore: at }), false, 'current');
  t.equal(sessionRevoked(claims, { epoch: 3, notBefore: 0 }), true, 'logout bumped the epoch');
  t.equal(sessionRevoked(claims, { epoch: 2, notBefore: at + 1 }), true, 'signed out everywhere after it');
  t.equal(sessionRevoked(claims, { epoch: 2, notBefore: 0, ended: new Set([claims.sid]) }), true);
  t.equal(recentlyAuthenticated(claims, 300, NOW + 299_000), true);
  t.equal(recentlyAuthenticated(claims, 300, NOW + 301_000), false);
});

t.test('cookies are __Host-, Secure, HttpOnly, SameSite=Strict; a doubled cookie is no cookie', async (t) => {
  const c = sessionCookie('a.b.c', 3600);
  t.equal(c, `${SESSION_COOKIE}=a.b.c; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Strict`);
  t.match(
    csrfCookie('tok', 60),
    /^__Host-engine_csrf=tok; Path=\/; Max-Age=60; Secure; HttpOnly; SameSite=Strict$/,
  );
  t.same(
    clearedCookies().map((x) => x.split(';')[0]),
    [`${SESSION_COOKIE}=`, `${CSRF_COOKIE}=`],
  );
  t.ok(clearedCookies().every((x) => x.includes('Max-Age=0')));
  t.throws(() => sessionCookie('a;b', 1), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' }, 'no header injection');
  t.same(readCookie(`x=1; ${SESSION_COOKIE}=abc; y=2`, SESSION_COOKIE), { present: true, value: 'abc' });
  t.same(readCookie('x=1', SESSION_COOKIE), { present: false, value: null });
  t.same(readCookie(undefined, SESSION_COOKIE), { present: false, value: null });
  t.same(
    readCookie(`${SESSION_COOKIE}=abc; ${SESSION_COOKIE}=def`, SESSION_COOKIE),
    { present: true, value: null },
    'shadowed: present but invalid, never absent',
  );
});

t.test('Origin and double-submit checks', async (t) => {
  const origin = 'https://console.example.org';
  t.equal(originCheck('GET', undefined, origin), 'exempt');
  t.equal(originCheck('options', 'https://evil.example', origin), 'exempt');
  t.equal(originCheck('POST', origin, origin), 'ok');
  t.equal(originCheck('POST', undefined, origin), 'failed', 'missing Origin fails');
  t.equal(originCheck('DELETE', 'https://console.example.org.evil.example', origin), 'failed');
  t.equal(originCheck('POST', `${origin}/`, origin), 'failed', 'exact match only');
  t.equal(originCheck('POST', origin, undefined), 'failed', 'no console origin: every cookie write fails');
  const key = newSessionKey();
  const token = csrfTokenFor(key, 'sid-1');
  t.equal(token, csrfTokenFor(key, 'sid-1'), 'stable for a session');
  t.not(token, csrfTokenFor(key, 'sid-2'), 'bound to the session');
  t.equal(csrfTokenValid(token, token, token), true);
  t.equal(csrfTokenValid(undefined, token, token), false, 'no header');
  t.equal(csrfTokenValid(token, null, token), false, 'no cookie');
  t.equal(csrfTokenValid('planted', 'planted', token), false, 'a planted pair without the session');
  t.equal(csrfTokenValid(token, `${token}x`, token), false);
});
