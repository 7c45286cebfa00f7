// Identity, key and audit events through the real HTTP routes of a started engine: the break-glass
// key set, role assign / remove / invite, sessions ended (one person, everyone, a passkey revoke),
// a pull credential minted, the admin token retired, and an audit chain break found by verify.
// Under owner-action dual control the event is raised when the second owner approves, never when
// the action is queued. No event carries the admin token, a pull-credential secret, an invite
// token or a session cookie.
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { encodeKeyFile, fingerprint, generateRecipient } from '@coffer/crypto';
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import t from 'tap';
import { ADMIN_TOKEN, bearer, http, startEngine } from '../helpers/engine.ts';
import { collect, delivered } from './helpers.ts';

const CONSOLE = 'https://console.coffer.test';

async function engine(t: Parameters<typeof startEngine>[0]) {
  const e = await startEngine(
    t,
    { CONSOLE_ORIGIN: CONSOLE },
    { rateLimit: { max: 1000, windowSeconds: 60 } },
  );
  const post = (path: string, body: unknown = {}, headers: Record<string, string> = bearer()) =>
    http(`${e.url}/admin/${path}`, { headers, body });
  const secrets: string[] = [ADMIN_TOKEN];
  const signIn = async (email: string, role?: string) => {
    if (role)
      await e.app.state.roles.assign({ subject: passkeySubject(email), role, email, grantedBy: 'test' });
    const m = await e.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
    secrets.push(m.token, m.csrfToken);
    return { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`, origin: CONSOLE };
  };
  return { ...e, post, secrets, signIn };
}

t.test('key, role, session, credential and admin-token events (gate open)', async (t) => {
  const e = await engine(t);
  const c = collect(e.app);

  const pair = generateRecipient();
  const key = await e.post('setup/break-glass-key', {
    publicKey: encodeKeyFile('recipient-public', pair.publicKey),
  });
  t.equal(key.status, 200, key.text);
  const refused = await e.post('setup/break-glass-key', {
    publicKey: encodeKeyFile('recipient-public', generateRecipient().publicKey),
  });
  t.equal(refused.status, 409, 'never replaced');
  await delivered();
  t.same(
    c.named('break-glass-key-set').map((x) => x.detail),
    [{ fingerprint: fingerprint(pair.publicKey), by: 'admin-token' }],
    'raised once, for the key actually set',
  );

  const op = passkeySubject('op@example.org');
  t.equal((await e.post('roles/assign', { email: 'op@example.org', role: 'operator' })).status, 200);
  t.equal((await e.post('roles/assign', { email: 'op@example.org', role: 'viewer' })).status, 200);
  t.equal((await e.post('roles/remove', { email: 'op@example.org' })).status, 200);
  t.equal((await e.post('roles/remove', { email: 'op@example.org' })).json().removed, false);
  const invite = await e.post('roles/invite', { email: 'new@example.org', role: 'viewer' });
  t.equal(invite.status, 200, invite.text);
  e.secrets.push(invite.json().inviteToken);
  await delivered();
  t.same(
    c.named('role-changed').map((x) => x.detail),
    [
      { subject: op, from: null, to: 'operator', by: 'admin-token', via: 'assign' },
      { subject: op, from: 'operator', to: 'viewer', by: 'admin-token', via: 'assign' },
      { subject: op, from: 'viewer', to: null, by: 'admin-token', via: 'remove' },
      {
        subject: passkeySubject('new@example.org'),
        from: null,
        to: 'viewer',
        by: 'admin-token',
        via: 'invite',
      },
    ],
    'one per applied change; a no-op remove raises nothing',
  );

  await e.signIn('bob@example.org', 'viewer');
  t.equal(
    (await e.post('sessions/terminate-user', { subject: passkeySubject('bob@example.org') })).status,
    200,
  );
  t.equal((await e.post('sessions/terminate-all')).status, 200);
  // A passkey revoke ends its holder's sessions too.
  await e.app.state.identity.addPasskey({
    id: 'bob-1',
    subject: passkeySubject('bob@example.org'),
    email: 'bob@example.org',
    publicKey: 'pQEC',
    counter: 0,
    transports: [],
  });
  t.equal((await e.post('signin-factors/revoke', { credentialId: 'bob-1' })).status, 200);
  t.equal((await e.post('signin-factors/revoke', { credentialId: 'nope' })).status, 404);
  await delivered();
  t.same(
    c.named('sessions-ended').map((x) => x.detail),
    [
      {
        scope: 'subject',
        subject: passkeySubject('bob@example.org'),
        by: 'admin-token',
        cause: 'terminate-user',
      },
      { scope: 'everyone', subject: null, by: 'admin-token', cause: 'terminate-all' },
      {
        scope: 'subject',
        subject: passkeySubject('bob@example.org'),
        by: 'admin-token',
        cause: 'signin-factor-revoke',
      },
    ],
  );

  const minted = await e.post('support/credentials', { scope: 'diagnostics', lifetimeSeconds: 3600 });
  t.equal(minted.status, 200, minted.text);
  e.secrets.push(minted.json().secret, minted.json().credential);
  await delivered();
  t.same(c.named('credential-minted')[0]?.detail, {
    scope: 'diagnostics',
    clientId: minted.json().clientId,
    expiresAt: minted.json().expiresAt,
    lifetimeSeconds: 3600,
    replaced: false,
    by: 'admin-token',
    viaOwnerAction: false,
  });

  // Retiring the admin token needs a way back in (two owners here); the refusal raises nothing.
  const early = await e.post('policy/retire-break-glass-token');
  t.equal(early.status, 409);
  for (const email of ['ada@example.org', 'dan@example.org'])
    await e.app.state.roles.assign({
      subject: passkeySubject(email),
      role: 'owner',
      email,
      grantedBy: 'test',
    });
  const retired = await e.post('policy/retire-break-glass-token');
  t.equal(retired.status, 200, retired.text);
  await delivered();
  t.same(
    c.named('admin-token-retired').map((x) => x.detail),
    [{ by: 'admin-token', viaOwnerAction: false }],
  );
  t.equal(c.all.length, 10, 'nothing else was raised');
  t.ok(
    c.all.every((x) => x.jobId === null),
    'identity events concern no job',
  );
  const text = JSON.stringify(c.all);
  for (const s of e.secrets) t.notOk(text.includes(s), 'no secret in any event');
});

t.test('owner actions under dual control raise when approved, not when queued', async (t) => {
  const e = await engine(t);
  const ada = await e.signIn('ada@example.org', 'owner');
  const dan = await e.signIn('dan@example.org', 'owner');
  const c = collect(e.app);
  t.equal((await e.post('policy/owner-actions', { armed: true }, ada)).status, 200);

  const mint = await e.post('support/credentials', { scope: 'metrics' }, ada);
  t.equal(mint.status, 202, mint.text);
  const grant = await e.post('roles/assign', { email: 'eve@example.org', role: 'owner' }, ada);
  t.equal(grant.status, 202, grant.text);
  const retire = await e.post('policy/retire-break-glass-token', {}, ada);
  t.equal(retire.status, 202, retire.text);
  await delivered();
  t.same(c.all, [], 'queued actions raise nothing');

  const rejected = await e.post(`owner-actions/${grant.json().id}/reject`, {}, dan);
  t.equal(rejected.status, 200);
  await delivered();
  t.same(c.all, [], 'a rejected owner action raises nothing');

  const approved = await e.post(`owner-actions/${mint.json().id}/approve`, {}, dan);
  t.equal(approved.status, 200, approved.text);
  e.secrets.push(approved.json().result.secret, approved.json().result.credential);
  const grant2 = await e.post('roles/assign', { email: 'eve@example.org', role: 'owner' }, ada);
  t.equal((await e.post(`owner-actions/${grant2.json().id}/approve`, {}, dan)).status, 200);
  t.equal((await e.post(`owner-actions/${retire.json().id}/approve`, {}, dan)).status, 200);
  await delivered();
  const via = (id: string) => ({
    viaOwnerAction: true,
    ownerActionId: id,
    by: passkeySubject('ada@example.org'),
    approvedBy: passkeySubject('dan@example.org'),
  });
  t.same(
    c.all.map((x) => [x.name, x.detail]),
    [
      [
        'credential-minted',
        {
          scope: 'metrics',
          clientId: approved.json().result.clientId,
          expiresAt: approved.json().result.expiresAt,
          ...via(mint.json().id),
        },
      ],
      [
        'role-changed',
        {
          subject: passkeySubject('eve@example.org'),
          from: null,
          to: 'owner',
          via: 'owner-action',
          ...via(grant2.json().id),
        },
      ],
      ['admin-token-retired', via(retire.json().id)],
    ],
  );

  const text = JSON.stringify(c.all);
  for (const s of e.secrets) t.notOk(text.includes(s), 'no secret in any event');
});

t.test('GET /admin/audit/verify finding a break raises audit-chain-break', async (t) => {
  const e = await engine(t);
  const c = collect(e.app);
  await e.post('jobs', { id: 'alpha', cadenceSeconds: 3600, source: { type: 'files', path: '/srv/data' } });
  const ok = await http(`${e.url}/admin/audit/verify`, { headers: bearer() });
  t.equal(ok.json().ok, true);
  await delivered();
  t.same(c.all, [], 'a chain that verifies raises nothing');

  // Tamper with one stored event directly in the SQLite file (as test/audit/routes.test.ts does).
  const db = new DatabaseSync(join(e.dataDir, 'state.sqlite'));
  const row = db.prepare('SELECT event FROM audit_events WHERE seq = 2').get() as { event: string };
  const edited = JSON.parse(row.event);
  edited.outcome = edited.outcome === 'applied' ? 'refused' : 'applied';
  db.prepare('UPDATE audit_events SET event = ? WHERE seq = 2').run(JSON.stringify(edited));
  db.close();
  const bad = await http(`${e.url}/admin/audit/verify`, { headers: bearer() });
  t.equal(bad.status, 200);
  t.equal(bad.json().firstBadSeq, 2);
  await delivered();
  t.same(c.all, [
    {
      name: 'audit-chain-break',
      at: c.all[0]?.at,
      jobId: null,
      detail: { firstBadSeq: 2, problem: bad.json().problem, anchored: bad.json().anchored },
    },
  ]);
});
