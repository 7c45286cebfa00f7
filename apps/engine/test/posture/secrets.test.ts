/**
 * No posture reply carries a secret. An engine given every kind of secret (admin token, SCIM
 * token, SMTP user name and password, the S3 credentials, an OIDC client secret, its own secret
 * keys) answers GET /admin/status, /admin/setup-state, /admin/preflight, /admin/licence,
 * /admin/destination, /admin/drill-all and /admin/drill-evidence; none of the replies (nor the
 * engine's log) holds any of them. The same engine shows the live probes at their best: SMTP
 * verified by greeting and EHLO against a real SMTP server (no authentication attempted), an OIDC
 * connection verified by discovery against a real provider and one failed (its provider gone), a
 * canary flight verified, and an update channel failed when its channel file is missing.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { encodeKeyFile, generateSigner } from '@coffer/crypto';
import { startTestOidcProvider } from '@coffer/testkit/oidc';
import { startTestSamlIdp } from '@coffer/testkit/saml';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http, startEngine } from '../helpers/engine.ts';
import { CONSOLE, postureWorld } from './helpers.ts';

const SMTP_USER = 'MARKER-posture-smtp-user-31';
const SMTP_PASSWORD = 'MARKER-posture-smtp-password-62';
const SCIM_TOKEN = 'MARKER-posture-scim-token-0123456789';

const w = await postureWorld(t);
let authTried = 0;
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  onAuth(_auth, _session, cb) {
    authTried++;
    cb(null, { user: 'x' });
  },
  onData(stream, _session, cb) {
    stream.resume();
    stream.on('end', () => cb());
  },
});
await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
t.teardown(() => new Promise<void>((r) => smtp.close(() => r())));
const smtpPort = (smtp.server.address() as AddressInfo).port;

const CALLBACK = `${CONSOLE}/admin/oidc/callback/`;
const op = await startTestOidcProvider({ redirectUris: [`${CALLBACK}acme`], accounts: {} });
t.teardown(() => op.close());
const gone = await startTestOidcProvider({ redirectUris: [`${CALLBACK}gone`], accounts: {} });
const samlIdp = await startTestSamlIdp({ users: {} });
t.teardown(() => samlIdp.close());

// An update channel whose signer is pinned but whose channel file does not exist.
const channelKey = join(w.dir, 'channel.pub');
writeFileSync(channelKey, encodeKeyFile('signer-public', generateSigner().publicKey));

const e = await startEngine(
  t,
  {
    ENGINE_BREAK_GLASS_PUBLIC_KEY: w.breakGlassPub,
    ENGINE_DESTINATIONS: `s3dest=${w.s3Url}`,
    CONSOLE_ORIGIN: CONSOLE,
    SCIM_BEARER_TOKEN: SCIM_TOKEN,
    ENGINE_SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
    ENGINE_SMTP_USERNAME: SMTP_USER,
    ENGINE_SMTP_PASSWORD: SMTP_PASSWORD,
    ENGINE_UPDATE_CHANNEL: join(w.dir, 'no-channel-here'),
    ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: channelKey,
  },
  { rateLimit: { max: 1000, windowSeconds: 60 } },
);

const connection = (id: string, issuer: string, clientId: string, clientSecret: string) => ({
  id,
  kind: 'oidc',
  displayName: id,
  allowedEmailDomains: ['example.org'],
  groupRoleMapping: [],
  oidc: { issuer, clientId, clientSecret, scopes: ['openid', 'email'] },
});

t.test('setup: two OIDC connections, a SAML one, one canary flight', async (t) => {
  for (const [id, p] of [
    ['acme', op],
    ['gone', gone],
  ] as const) {
    const r = await http(`${e.url}/admin/idp/connections`, {
      headers: bearer(),
      body: connection(id, p.issuer, p.clientId, p.clientSecret),
    });
    t.equal(r.status, 201, r.text);
  }
  const saml = await http(`${e.url}/admin/idp/connections`, {
    headers: bearer(),
    body: {
      id: 'pasted',
      kind: 'saml',
      displayName: 'Pasted SSO',
      allowedEmailDomains: ['example.org'],
      groupRoleMapping: [],
      saml: { idpMetadataXml: samlIdp.metadataXml },
    },
  });
  t.equal(saml.status, 201, saml.text);
  await gone.close();
  const flight = await e.app.canary.fly('schedule');
  t.equal(flight.verdict, 'alive');
});

t.test('the live probes at their best (and two failures)', async (t) => {
  const r = await http(`${e.url}/admin/preflight`, { headers: bearer() });
  t.equal(r.status, 200, r.text);
  const items = Object.fromEntries(
    // biome-ignore lint/suspicious/noExplicitAny: items are read field by field
    r.json().items.map((i: any) => [i.id, i]),
  );
  t.match(items.smtp, {
    status: 'verified',
    evidence: {
      host: '127.0.0.1',
      port: smtpPort,
      tls: false,
      greeting: 220,
      ehlo: 250,
      authenticationTried: false,
    },
  });
  t.equal(authTried, 0, 'the probe never authenticated');
  t.match(items['idp:acme'], { status: 'verified', evidence: { kind: 'oidc', source: 'discovery' } });
  t.match(items['idp:gone'], { status: 'failed', evidence: { kind: 'oidc' }, remediation: /discovery/ });
  t.match(items['idp:pasted'], {
    status: 'configured',
    evidence: { kind: 'saml', source: 'pasted-metadata', metadataPresent: true },
  });
  t.match(items.canary, { status: 'verified', evidence: { verdict: 'alive', lastFlightAt: /^\d{4}-/ } });
  t.match(items['update-channel'], {
    status: 'failed',
    evidence: { configured: true, verified: false, code: /^ERR_UPDATE_/ },
  });
  t.match(items['destination:s3dest'], { status: 'verified' });
});

t.test('no reply and no log line holds a secret', async (t) => {
  const keyLines = (file: string) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.length > 40);
  const secrets = [
    ADMIN_TOKEN,
    SCIM_TOKEN,
    SMTP_USER,
    SMTP_PASSWORD,
    w.bucket.credentials.secretAccessKey,
    op.clientSecret,
    ...keyLines(e.app.keys.signer.file),
    ...keyLines(e.app.keys.operational.file),
  ];
  t.ok(
    secrets.every((s) => s.length >= 8),
    'every marker is long enough to mean something',
  );
  const paths = [
    '/status',
    '/setup-state',
    '/preflight',
    '/licence',
    '/destination',
    '/drill-all',
    '/drill-evidence',
  ];
  for (const path of paths) {
    const r = await http(`${e.url}/admin${path}`, { headers: bearer() });
    t.equal(r.status, 200, `${path}: ${r.text.slice(0, 200)}`);
    for (const s of secrets) t.notOk(r.text.includes(s), `${path} holds no secret`);
  }
  const status = (await http(`${e.url}/admin/status`, { headers: bearer() })).json();
  t.match(status, {
    smtpConfigured: true,
    smtpCredentialsPresent: true,
    scimEnabled: true,
    updateChannelConfigured: true,
    identityProviders: { connections: 3, enabled: 3, oidc: 2, saml: 1 },
    canary: { verdict: 'alive' },
    licence: { tier: 'free', status: 'absent' },
  });
  const logs = e.logs.join('');
  for (const s of secrets) t.notOk(logs.includes(s), 'the log holds no secret');
});
