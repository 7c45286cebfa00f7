// OIDC sign-in against a real OpenID provider (oidc-provider) on 127.0.0.1, driven through the
// whole redirect dance by a real HTTP client (fetch with manual redirects and a cookie jar) that
// fills the provider's own login and consent pages: the happy path (subject, email, groups), every
// refusal with its reason code (wrong state, replayed code, wrong nonce, unverified email, a
// disallowed domain, a mix-up from another issuer, metadata naming another issuer, an expired ID
// token, a PKCE mismatch, an aborted sign-in), the transaction cookie and the group mapping.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { startTestOidcProvider, TestBrowser } from '@coffer/testkit/oidc';
import { randomNonce, randomPKCECodeVerifier } from 'openid-client';
import t from 'tap';
import {
  checkOidcConnection,
  decodeOidcTransaction,
  discoverOidcProvider,
  encodeOidcTransaction,
  isIdentityError,
  newOidcTransactionKey,
  OIDC_TRANSACTION_COOKIE,
  type OidcConnection,
  type OidcProvider,
  type OidcTransaction,
  oidcCallback,
  oidcStart,
  oidcSubject,
  oidcTransactionCookie,
  roleForGroups,
} from '../src/index.ts';

const REDIRECT = 'http://127.0.0.1:9/admin/oidc/callback/acme';
const CLIENT_ID = 'coffer-engine';
const CLIENT_SECRET = 'a-test-client-secret-of-some-length-0123456789';

interface Account {
  email?: string;
  email_verified?: boolean;
  groups?: string[];
}

const ACCOUNTS: Record<string, Account> = {
  'ada-0001': { email: 'Ada@Example.org', email_verified: true, groups: ['staff', 'backup-admins'] },
  'bob-0002': { email: 'bob@example.org', email_verified: false, groups: ['staff'] },
  'eve-0003': { email: 'eve@evil.example', email_verified: true, groups: ['backup-admins'] },
  'sue-0004': { email: 'sue@sub.example.org', email_verified: true },
  'max-0005': { email_verified: true },
};

interface RunningProvider {
  issuer: string;
  /** error_detail of every grant error the provider raised (why it refused a code). */
  grantErrors: string[];
  servers: Server[];
  provider: { callback(): (req: IncomingMessage, res: ServerResponse) => void };
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A real OpenID provider on loopback with the test client and accounts (@coffer/testkit/oidc). */
async function startProvider(): Promise<RunningProvider> {
  const op = await startTestOidcProvider({
    redirectUris: [REDIRECT],
    accounts: ACCOUNTS,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    // ID tokens live two minutes: the expiry test moves the relying party's clock five ahead.
    idTokenTtl: 120,
  });
  return {
    issuer: op.issuer,
    grantErrors: op.grantErrors,
    servers: [op.server],
    provider: { callback: () => op.listener },
  };
}

function connectionFor(issuer: string, extra: Partial<OidcConnection> = {}): OidcConnection {
  return {
    id: 'acme',
    issuer,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    allowedEmailDomains: ['example.org'],
    scopes: ['openid', 'email', 'groups'],
    groupsClaim: 'groups',
    ...extra,
  };
}

/** The reason code of an OIDC refusal, checking that the message carries none of `secrets`. */
async function reason(p: Promise<unknown>, secrets: readonly string[] = []): Promise<string> {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    if (
      !isIdentityError(e, 'ERR_IDENTITY_OIDC_REFUSED') &&
      !isIdentityError(e, 'ERR_IDENTITY_OIDC_UNAVAILABLE')
    )
      throw e;
    for (const s of secrets)
      if (s.length > 0 && e.message.includes(s)) t.fail(`message carries a secret: ${e.message}`);
    t.notMatch(e.message, /eyJ/, 'no JWT in the message');
    return `${e.code === 'ERR_IDENTITY_OIDC_UNAVAILABLE' ? 'unavailable:' : ''}${e.refusal ?? 'none'}`;
  }
}

const secretsOf = (tx: OidcTransaction, callback: string) => {
  const q = new URL(callback).searchParams;
  return [tx.state, tx.nonce, tx.codeVerifier, q.get('code') ?? '', CLIENT_SECRET];
};

const op = await startProvider();
t.teardown(() => {
  for (const s of op.servers) s.close();
});
const acme: OidcProvider = await discoverOidcProvider(connectionFor(op.issuer));

/** A fresh browser signs `login` in up to the callback. */
async function dance(provider: OidcProvider = acme, login = 'ada-0001') {
  const { authorizationUrl, transaction } = await oidcStart(provider, { redirectUri: REDIRECT });
  const callback = await new TestBrowser().signIn(authorizationUrl, login, REDIRECT);
  return { authorizationUrl, transaction, callback };
}

t.test('the happy path: subject from connection, issuer and sub; verified email; live groups', async (t) => {
  const key = newOidcTransactionKey();
  const { authorizationUrl, transaction } = await oidcStart(acme, { redirectUri: REDIRECT });
  const auth = new URL(authorizationUrl);
  t.equal(auth.origin, op.issuer);
  t.equal(auth.searchParams.get('response_type'), 'code');
  t.equal(auth.searchParams.get('client_id'), CLIENT_ID);
  t.equal(auth.searchParams.get('redirect_uri'), REDIRECT);
  t.equal(auth.searchParams.get('scope'), 'openid email groups');
  t.equal(auth.searchParams.get('state'), transaction.state);
  t.equal(auth.searchParams.get('nonce'), transaction.nonce);
  t.equal(auth.searchParams.get('code_challenge_method'), 'S256');
  t.notOk(authorizationUrl.includes(transaction.codeVerifier), 'the verifier never leaves the transaction');
  t.ok(transaction.expiresAt - Date.now() > 9 * 60_000 && transaction.expiresAt - Date.now() <= 10 * 60_000);

  // The browser carries the transaction in its cookie and comes back.
  const cookie = encodeOidcTransaction(key, transaction);
  const callback = await new TestBrowser().signIn(authorizationUrl, 'ada-0001', REDIRECT);
  t.equal(new URL(callback).searchParams.get('iss'), op.issuer, 'RFC 9207 iss parameter present');
  const identity = await oidcCallback(acme, decodeOidcTransaction(key, cookie), callback);
  t.equal(identity.subject, `oidc:acme:${op.issuer}#ada-0001`);
  t.equal(identity.subject, oidcSubject('acme', op.issuer, 'ada-0001'));
  t.notMatch(identity.subject, /@/, 'the subject never holds the email');
  t.equal(identity.email, 'ada@example.org', 'normalised');
  t.same(identity.groups, ['staff', 'backup-admins']);
  t.equal(identity.sub, 'ada-0001');
  t.equal(identity.issuer, op.issuer);
  t.equal(identity.claims.aud, CLIENT_ID);
  t.equal(identity.claims.nonce, transaction.nonce);
  t.equal(
    identity.claims.email_verified,
    true,
    'completed from userinfo (the provider keeps scope claims there)',
  );
  t.equal(
    roleForGroups(
      [
        { group: 'backup-admins', role: 'admin' },
        { group: 'staff', role: 'viewer' },
      ],
      identity.groups,
    ),
    'admin',
  );
});

t.test('a wrong state is refused before anything is exchanged', async (t) => {
  const { transaction, callback } = await dance();
  const tampered = new URL(callback);
  tampered.searchParams.set('state', `${transaction.state.slice(0, -1)}x`);
  t.equal(
    await reason(oidcCallback(acme, transaction, tampered), secretsOf(transaction, callback)),
    'state-mismatch',
  );
  const missing = new URL(callback);
  missing.searchParams.delete('state');
  t.equal(await reason(oidcCallback(acme, transaction, missing)), 'state-mismatch');
  const doubled = new URL(callback);
  doubled.searchParams.append('state', transaction.state);
  t.equal(await reason(oidcCallback(acme, transaction, doubled)), 'state-mismatch');
  // Another browser's transaction (a callback injected into this browser) is refused too.
  const other = await oidcStart(acme, { redirectUri: REDIRECT });
  t.equal(await reason(oidcCallback(acme, other.transaction, callback)), 'state-mismatch');
  // The code was never spent: the genuine pair still signs in.
  t.equal((await oidcCallback(acme, transaction, callback)).sub, 'ada-0001');
});

t.test('a replayed code is refused by the provider', async (t) => {
  const { transaction, callback } = await dance();
  t.equal((await oidcCallback(acme, transaction, callback)).sub, 'ada-0001');
  const before = op.grantErrors.length;
  t.equal(
    await reason(oidcCallback(acme, transaction, callback), secretsOf(transaction, callback)),
    'code-rejected',
  );
  t.same(op.grantErrors.slice(before), ['authorization code already consumed']);
});

t.test('a PKCE mismatch is refused by the provider, and the code stays usable by its owner', async (t) => {
  const { transaction, callback } = await dance();
  const before = op.grantErrors.length;
  const forged = { ...transaction, codeVerifier: randomPKCECodeVerifier() };
  t.equal(await reason(oidcCallback(acme, forged, callback), secretsOf(forged, callback)), 'code-rejected');
  t.same(
    op.grantErrors.slice(before),
    ['code_verifier does not match code_challenge'],
    'the provider says which check refused',
  );
  t.equal(
    (await oidcCallback(acme, transaction, callback)).sub,
    'ada-0001',
    'the right verifier still works',
  );
});

t.test('an ID token carrying another nonce is refused', async (t) => {
  const { transaction, callback } = await dance();
  const other = { ...transaction, nonce: randomNonce() };
  t.equal(await reason(oidcCallback(acme, other, callback), secretsOf(other, callback)), 'nonce-mismatch');
});

t.test('an unverified or missing email is refused', async (t) => {
  const bob = await dance(acme, 'bob-0002');
  t.equal(await reason(oidcCallback(acme, bob.transaction, bob.callback)), 'email-unverified');
  const max = await dance(acme, 'max-0005');
  t.equal(await reason(oidcCallback(acme, max.transaction, max.callback)), 'email-missing');
});

t.test('an email outside the allowed domains is refused (exact domain, no subdomains)', async (t) => {
  const eve = await dance(acme, 'eve-0003');
  t.equal(await reason(oidcCallback(acme, eve.transaction, eve.callback)), 'email-domain');
  const sue = await dance(acme, 'sue-0004');
  t.equal(await reason(oidcCallback(acme, sue.transaction, sue.callback)), 'email-domain');
  // The same person is admitted once the connection lists their domain.
  const wider = await discoverOidcProvider(
    connectionFor(op.issuer, { allowedEmailDomains: ['example.org', 'SUB.example.org'] }),
  );
  const again = await dance(wider, 'sue-0004');
  const identity = await oidcCallback(wider, again.transaction, again.callback);
  t.equal(identity.email, 'sue@sub.example.org');
  t.same(identity.groups, [], 'no group claim: no groups');
});

t.test('a response from another issuer (mix-up) is refused', async (t) => {
  // A second, real provider that knows the same client: the attacker's.
  const attacker = await startProvider();
  t.teardown(() => attacker.servers[0]!.close());
  const { authorizationUrl, transaction } = await oidcStart(acme, { redirectUri: REDIRECT });
  const swapped = new URL(authorizationUrl);
  const evil = new URL(attacker.issuer);
  swapped.host = evil.host;
  const callback = await new TestBrowser().signIn(swapped.href, 'ada-0001', REDIRECT);
  t.equal(new URL(callback).searchParams.get('iss'), attacker.issuer);
  t.equal(
    await reason(oidcCallback(acme, transaction, callback), secretsOf(transaction, callback)),
    'issuer-mismatch',
  );
  const noIss = new URL(callback);
  noIss.searchParams.delete('iss');
  t.equal(
    await reason(oidcCallback(acme, transaction, noIss)),
    'issuer-mismatch',
    'iss advertised, so required',
  );
});

t.test('metadata naming another issuer is refused at discovery', async (t) => {
  // The same provider also answers on a second port: its metadata names the first.
  const impostor = createServer(op.provider.callback());
  const port = await listen(impostor);
  t.teardown(() => impostor.close());
  t.equal(
    await reason(discoverOidcProvider(connectionFor(`http://127.0.0.1:${port}`))),
    'unavailable:issuer-mismatch',
  );
  t.equal(
    await reason(discoverOidcProvider(connectionFor(`${op.issuer}/`))),
    'unavailable:issuer-mismatch',
    'a trailing slash is another issuer',
  );
});

t.test('an expired ID token is refused (the provider issues two-minute tokens)', async (t) => {
  const { transaction, callback } = await dance();
  const later = Date.now() + 5 * 60_000;
  t.equal(await reason(oidcCallback(acme, transaction, callback, { now: later })), 'token-expired');
});

t.test('an aborted sign-in comes back as a provider error', async (t) => {
  const { authorizationUrl, transaction } = await oidcStart(acme, { redirectUri: REDIRECT });
  const callback = await new TestBrowser().signIn(authorizationUrl, 'ada-0001', REDIRECT, { abort: true });
  t.equal(new URL(callback).searchParams.get('error'), 'access_denied');
  t.equal(await reason(oidcCallback(acme, transaction, callback)), 'provider-error');
});

t.test('the transaction must be live and for this connection', async (t) => {
  const { transaction, callback } = await dance();
  t.equal(
    await reason(oidcCallback(acme, transaction, callback, { now: transaction.expiresAt })),
    'transaction-expired',
  );
  t.equal(
    await reason(oidcCallback(acme, { ...transaction, connectionId: 'other' }, callback)),
    'connection-mismatch',
  );
  t.equal(await reason(oidcCallback(acme, transaction, 'not a url')), 'response-invalid');
});

t.test('the transaction cookie: round trip, tampering, another key, expiry, attributes', async (t) => {
  const key = newOidcTransactionKey();
  const { transaction } = await oidcStart(acme, { redirectUri: REDIRECT, now: 1_000_000 });
  t.equal(transaction.expiresAt, 1_000_000 + 10 * 60_000);
  const value = encodeOidcTransaction(key, transaction);
  t.match(value, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  t.same(decodeOidcTransaction(key, value, { now: 1_000_000 }), transaction);

  const [body, sig] = value.split('.') as [string, string];
  const json = JSON.parse(Buffer.from(body, 'base64url').toString());
  const forgedBody = Buffer.from(JSON.stringify({ ...json, expiresAt: json.expiresAt + 3600_000 })).toString(
    'base64url',
  );
  const flip = (s: string) => `${s.slice(0, -2)}${s.at(-2) === 'A' ? 'B' : 'A'}${s.slice(-1)}`;
  for (const [what, v] of [
    ['a changed payload', `${forgedBody}.${sig}`],
    ['a flipped signature character', `${body}.${flip(sig)}`],
    ['no signature', body],
    ['an empty signature', `${body}.`],
    ['junk', 'not-a-transaction'],
    ['empty', ''],
  ] as const)
    t.equal(
      await reason(Promise.resolve().then(() => decodeOidcTransaction(key, v, { now: 1_000_000 }))),
      'transaction-invalid',
      what,
    );
  t.equal(
    await reason(Promise.resolve().then(() => decodeOidcTransaction(key, undefined))),
    'transaction-invalid',
  );
  t.equal(
    await reason(
      Promise.resolve().then(() => decodeOidcTransaction(newOidcTransactionKey(), value, { now: 1_000_000 })),
    ),
    'transaction-invalid',
    'another key',
  );
  t.equal(
    await reason(
      Promise.resolve().then(() => decodeOidcTransaction(key, value, { now: transaction.expiresAt })),
    ),
    'transaction-expired',
  );
  t.throws(() => encodeOidcTransaction(new Uint8Array(16), transaction), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });

  t.equal(
    oidcTransactionCookie(value, 600),
    `${OIDC_TRANSACTION_COOKIE}=${value}; Path=/; Max-Age=600; Secure; HttpOnly; SameSite=Lax`,
  );
  t.match(oidcTransactionCookie('', 0), /^__Host-engine_oidc=; Path=\/; Max-Age=0;/);
  t.throws(() => oidcTransactionCookie('a;b', 1), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
});

t.test('group-to-role mapping: first matching row wins, exact names, none is null', async (t) => {
  const mapping = [
    { group: 'coffer-owners', role: 'owner' },
    { group: 'coffer-admins', role: 'admin' },
    { group: 'coffer-ops', role: 'operator' },
    { group: 'everyone', role: 'viewer' },
  ];
  const vectors: [string[], string | null][] = [
    [['coffer-admins', 'coffer-owners'], 'owner'],
    [['everyone', 'coffer-ops'], 'operator'],
    [['everyone'], 'viewer'],
    [['Coffer-Admins'], null],
    [['coffer-admins '], null],
    [[], null],
    [['unrelated'], null],
  ];
  for (const [groups, role] of vectors)
    t.equal(roleForGroups(mapping, groups), role, groups.join(',') || '(none)');
  t.equal(roleForGroups([], ['coffer-owners']), null, 'an empty mapping maps nobody');
  t.equal(
    roleForGroups(
      [
        { group: 'a', role: 'viewer' },
        { group: 'b', role: 'owner' },
      ],
      ['b', 'a'],
    ),
    'viewer',
    'precedence is the mapping order, not the claim order',
  );
  t.throws(() => roleForGroups([{ group: '', role: 'x' }], ['']), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
  t.throws(() => roleForGroups([{ group: 'g', role: '' }], ['g']), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
});

t.test('discovery: a silent provider times out, a closed port is unreachable', async (t) => {
  const sockets: Socket[] = [];
  const silent = createTcpServer((s) => sockets.push(s));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const port = (silent.address() as { port: number }).port;
  const started = Date.now();
  t.equal(
    await reason(discoverOidcProvider(connectionFor(`http://127.0.0.1:${port}`), { timeoutMs: 300 })),
    'unavailable:provider-unreachable',
  );
  t.ok(Date.now() - started < 3000, 'gave up on time');
  const closed = createServer();
  const closedPort = await listen(closed);
  await new Promise((resolve) => closed.close(resolve));
  t.equal(
    await reason(discoverOidcProvider(connectionFor(`http://127.0.0.1:${closedPort}`))),
    'unavailable:provider-unreachable',
  );
});

t.test('connections and redirect URIs are checked before anything is sent', async (t) => {
  const base = connectionFor('https://id.example.org');
  t.doesNotThrow(() => checkOidcConnection(base));
  for (const [what, bad] of [
    ['http off loopback', { issuer: 'http://id.example.org' }],
    ['an issuer with a query', { issuer: 'https://id.example.org/?x=1' }],
    ['an issuer with a fragment', { issuer: 'https://id.example.org/#x' }],
    ['no domains', { allowedEmailDomains: [] }],
    ['a domain that is not one', { allowedEmailDomains: ['*.example.org'] }],
    ['a connection id with a colon', { id: 'a:b' }],
    ['an upper-case connection id', { id: 'Acme' }],
    ['no client id', { clientId: '' }],
    ['an empty secret', { clientSecret: '' }],
    ['a scope with a space', { scopes: ['openid email'] }],
  ] as const)
    t.throws(
      () => checkOidcConnection({ ...base, ...bad } as OidcConnection),
      { code: 'ERR_IDENTITY_INVALID_ARGUMENT' },
      what,
    );
  for (const uri of ['http://console.example.org/cb', 'https://c.example.org/cb#x', 'not a url'])
    await t.rejects(oidcStart(acme, { redirectUri: uri }), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' }, uri);
  t.throws(() => oidcSubject('acme', 'https://id.example.org', ''), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });
  t.equal(
    oidcSubject('acme', 'https://id.example.org', 'a#b:c'),
    'oidc:acme:https://id.example.org#a#b:c',
    'everything after the first # is sub',
  );
});
