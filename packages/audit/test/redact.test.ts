// The redaction guard: every rule recognises its kind of secret, ordinary engine values pass, the
// sanitiser strips and the assertion refuses, and buildEvent never writes a secret into the chain.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import {
  assertNoSecrets,
  buildEvent,
  findSecrets,
  isSensitiveFieldName,
  looksSecret,
  REDACTED,
  sanitizeDetail,
} from '../src/index.ts';

t.test('each rule recognises its secrets', async (t) => {
  const cases: Array<[string, string]> = [
    ['-----BEGIN PRIVATE KEY-----\nMIIE...', 'armoured-key'],
    ['-----BEGIN COFFER RECIPIENT SECRET KEY-----', 'armoured-key'],
    ['AGE-SECRET-KEY-1QQQQ', 'armoured-key'],
    ['untrusted comment: minisign secret key', 'armoured-key'],
    [`dps_${randomBytes(24).toString('base64url')}`, 'pull-credential'],
    ['dpc_AbCdEf12', 'pull-credential'],
    ['Bearer dpc_abc.dps_def', 'bearer-token'],
    ['dpc_abcd.dps_efgh', 'pull-credential'],
    ['Authorization: Bearer abcdefgh12345678', 'bearer-token'],
    ['Basic dXNlcjpwYXNzd29yZA==', 'bearer-token'],
    ['eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln', 'jwt'],
    ['ghp_0123456789abcdefABCDEF', 'known-token-prefix'],
    ['xoxb-1234-5678-abcdef', 'known-token-prefix'],
    ['sk_live_abcdef123456', 'known-token-prefix'],
    ['AKIAIOSFODNN7EXAMPLE', 'known-token-prefix'],
    ['postgres://coffer:hunter2@127.0.0.1:5432/db', 'url-credentials'],
    ['https://token@github.com/org/repo', 'url-credentials'],
    ['see s3://AKIDX:secretvalue@bucket', 'url-credentials'],
    ['x'.repeat(513), 'too-long'],
    ['https://hooks.slack.com/services/T000/B000/XXXXXXXX', 'url'],
    ['https://bucket.s3.amazonaws.com/key?X-Amz-Signature=abc', 'url'],
    ['https://example.com/#frag', 'url'],
    ['ab'.repeat(40), 'hex-blob'],
    [randomBytes(32).toString('hex'), 'hex-blob'],
  ];
  t.plan(cases.length + 1);
  for (const [text, rule] of cases) t.equal(looksSecret(text), rule, `${rule}: ${text.slice(0, 24)}`);
  // Random base64 is caught by a heuristic: check a fixed, high-entropy sample.
  t.equal(looksSecret('q3Zp9Lk2Vx8Tn4Rb7Wc1Ym6Hs0Jd5Gf2Ka8Ue3Io9Pq'), 'base64-blob');
});

t.test('ordinary engine values pass', async (t) => {
  const clean = [
    'nightly-db',
    'nightly-postgres-backup-for-production-db',
    'MyJob2024ProductionDatabaseBackupNightly',
    'backups/Prod2024/Database/Nightly/Archive01',
    `sha384:${'ab'.repeat(48)}`,
    '550e8400-e29b-41d4-a716-446655440000',
    'alice@example.com',
    'https://console.example.com',
    'https://console.example.com/',
    '203.0.113.7',
    '2001:db8::42',
    'restore.apply',
    'audit-feed',
    '2025-01-31T10:05:00.000Z',
    'destination rejected the write (NoSuchBucket)',
    'caf\u00e9 \u2603',
    '',
  ];
  t.plan(clean.length);
  for (const text of clean) t.equal(looksSecret(text), null, text);
});

t.test('identity fields get only the strong rules', async (t) => {
  t.equal(
    looksSecret('https://issuer.example.com/tenant/v2.0|abc', { heuristics: false }),
    null,
    'issuer URL subject',
  );
  t.equal(
    looksSecret('AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ', { heuristics: false }),
    null,
    'opaque subject',
  );
  t.equal(looksSecret('dps_x1y2z3w4', { heuristics: false }), 'pull-credential');
  t.equal(looksSecret('https://u:p@h', { heuristics: false }), 'url-credentials');
});

t.test('sensitive field names', async (t) => {
  const sensitive = [
    'password',
    'adminPassword',
    'secret',
    'clientSecret',
    'token',
    'access_token',
    'Authorization',
    'cookie',
    'credentials',
    'apiKey',
    'api-key',
    'privateKey',
    'secretAccessKey',
    'signingKey',
    'dsn',
    'connectionString',
  ];
  const fine = [
    'tokenPathClosed',
    'secretPresent',
    'credentialScope',
    'key',
    'planKey',
    'publicKey',
    'fingerprint',
    'scope',
  ];
  t.plan(sensitive.length + fine.length);
  for (const name of sensitive) t.ok(isSensitiveFieldName(name), name);
  for (const name of fine) t.notOk(isSensitiveFieldName(name), name);
});

t.test('sanitizeDetail strips, assertNoSecrets refuses', async (t) => {
  const detail = {
    scope: 'audit-feed',
    adminTokenPresent: true,
    token: 'abc',
    password: null,
    nested: { webhookUrl: 'https://hooks.example.com/T/B/secret', list: ['ok', 'Bearer abcdefghijklmnop'] },
    credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    dps_abcdefgh: 1,
  };
  const { value, findings } = sanitizeDetail(detail);
  t.same(value, {
    scope: 'audit-feed',
    adminTokenPresent: true,
    token: REDACTED,
    password: null,
    nested: { webhookUrl: REDACTED, list: ['ok', REDACTED] },
    credentials: REDACTED,
    '[redacted-key-1]': 1,
  });
  t.same(findings, [
    { path: 'detail.token', rule: 'sensitive-field' },
    { path: 'detail.nested.webhookUrl', rule: 'url' },
    { path: 'detail.nested.list[1]', rule: 'bearer-token' },
    { path: 'detail.credentials', rule: 'sensitive-field' },
    { path: 'detail[?]', rule: 'pull-credential' },
  ]);
  t.same(detail.token, 'abc', 'the input is not modified');
  t.same(findSecrets({ ok: 1, flag: true, n: null }), []);
  t.doesNotThrow(() => assertNoSecrets({ jobId: 'nightly-db', configRev: 3 }));
  const err = t.throws(() => assertNoSecrets({ nested: { url: 'https://u:p@h' } }), {
    code: 'ERR_AUDIT_SECRET_DETECTED',
  }) as Error;
  t.match(err.message, 'detail.nested.url');
  t.match(err.message, 'url-credentials');
  t.notMatch(err.message, 'u:p');
});

t.test('buildEvent sanitises every caller string', async (t) => {
  const secret = `dps_${randomBytes(24).toString('base64url')}`;
  const e = buildEvent(null, {
    action: 'credential-mint',
    actor: { email: secret, subject: `Bearer ${secret}`, method: 'admin-token' },
    role: secret,
    sourceAddress: secret,
    approver: { email: null, subject: secret },
    target: 'https://u:p@example.com',
    outcome: 'applied',
    detail: { scope: 'audit-feed', secret, note: `presented ${secret}` },
  });
  t.notMatch(JSON.stringify(e), secret.slice(4), 'the secret appears nowhere in the event');
  t.equal(e.actor.email, REDACTED);
  t.equal(e.actor.subject, REDACTED);
  t.equal(e.role, REDACTED);
  t.equal(e.sourceAddress, REDACTED);
  t.equal(e.approver?.subject, REDACTED);
  t.equal(e.target, REDACTED);
  t.same(e.detail, { note: REDACTED, scope: 'audit-feed', secret: REDACTED });
});

t.test('a single sign-on subject as target is an identity field; other URL targets are not', async (t) => {
  const event = (target: string) =>
    buildEvent(null, {
      action: 'role-change',
      actor: { email: null, subject: null, method: 'admin-token' },
      target,
      outcome: 'applied',
      detail: {},
    });
  const oidc = `oidc:corp:https://sso.example.org/realms/corp#${'f'.repeat(36)}`;
  t.equal(event(oidc).target, oidc, 'an issuer with a path is kept');
  const saml = `saml:corp-saml:https://idp.example.org/app/exk123/sso/saml/metadata#${'a1b2'.repeat(60)}`;
  t.ok(saml.length > 256, 'longer than other targets may be');
  t.equal(event(saml).target, saml, 'a long NameID is kept');
  t.equal(
    event('https://hooks.example.org/T000/B000/secretpath').target,
    REDACTED,
    'a URL target is still redacted',
  );
  t.equal(event('oidc:corp:https://u:p@sso.example.org#x').target, REDACTED, 'strong rules still apply');
  t.equal(
    event(`oidc:corp:https://sso.example.org#Bearer ${'x'.repeat(30)}`).target,
    REDACTED,
    'not a subject shape',
  );
});
