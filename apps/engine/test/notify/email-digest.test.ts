// Notifications by mail and by digest through a started engine (SQLite, then PostgreSQL): the
// caller's own email test over a real SMTP listener (400 for a caller without an email, the SMTP
// password never in the logs), an email channel receiving a failing run, and digests: success
// events queued under a daily digest rule survive an engine restart (kept in the state store) and
// arrive as one message when due; a due entry is sent once even with two engines on one store.

import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, tempDir } from '@coffer/testkit';
import { SMTPServer } from 'smtp-server';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { writeTree } from '../runs/helpers/world.ts';

const CONSOLE = 'https://console.coffer.test';
const SMTP_PASSWORD = 'MARKER-notify-smtp-password-77';

async function smtpInbox(t: { teardown(fn: () => unknown): void }) {
  const inbox: { to: string[]; text: string }[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    onAuth(auth, _s, cb) {
      cb(null, { user: auth.username });
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        inbox.push({
          to: session.envelope.rcptTo.map((r) => r.address),
          text: Buffer.concat(chunks).toString('utf8'),
        });
        cb();
      });
    },
  });
  await new Promise<void>((r) => smtp.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => smtp.close(() => r())));
  return { inbox, port: (smtp.server.address() as AddressInfo).port };
}

const waitFor = async (cond: () => boolean, ms = 10_000) => {
  for (const until = Date.now() + ms; !cond() && Date.now() < until; )
    await new Promise((r) => setTimeout(r, 25));
  return cond();
};

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`email and digests (${backend})`, async (t) => {
    const root = tempDir(t, 'coffer-notify-mail-');
    writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
    const source = join(root, 'source');
    writeTree(source, { 'a.txt': 'alpha' });
    const { inbox, port } = await smtpInbox(t);
    const env = {
      ENGINE_DATA_DIR: join(root, 'data'),
      CONSOLE_ORIGIN: CONSOLE,
      ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
      ENGINE_SMTP_URL: `smtp://127.0.0.1:${port}`,
      ENGINE_SMTP_USERNAME: 'coffer',
      ENGINE_SMTP_PASSWORD: SMTP_PASSWORD,
      ENGINE_MAIL_FROM: 'coffer@example.org',
      HARNESS_TEST_FAULTS: '1',
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    };
    const opts = { rateLimit: { max: 1000, windowSeconds: 60 }, notify: { timeoutMs: 2000, backoffMs: 50 } };
    const e = await startEngine(t, env, opts);
    const post = (path: string, body: unknown, headers: Record<string, string> = bearer()) =>
      http(`${e.url}/admin${path}`, { headers, body });

    // The caller's own email: a person's session works, the bare token has no email.
    const noEmail = await post('/email/test', {});
    t.equal(noEmail.status, 400);
    t.match(noEmail.json().error, /no verified email/);
    await e.app.state.roles.assign({
      subject: passkeySubject('me@example.org'),
      email: 'me@example.org',
      role: 'viewer',
      grantedBy: 'test',
    });
    const me = await e.app.sessions.mint({
      subject: passkeySubject('me@example.org'),
      email: 'me@example.org',
      method: 'passkey',
    });
    const mine = await post(
      '/email/test',
      { to: 'someone-else@example.org' },
      { cookie: `${SESSION_COOKIE}=${me.token}`, origin: CONSOLE },
    );
    t.equal(mine.status, 200, mine.text);
    t.ok(await waitFor(() => inbox.length === 1), 'one message');
    t.same(inbox[0]!.to, ['me@example.org'], "to the caller's own address only (the body is ignored)");
    t.match(inbox[0]!.text, /test/i);

    // An email channel receives a failing run.
    const ch = await post('/notify/channels', {
      kind: 'email',
      name: 'Ops mail',
      toAddresses: ['ops@example.org'],
    });
    t.equal(ch.status, 200, ch.text);
    const channelId = ch.json().channel.id as string;
    t.equal(
      (await post('/jobs', { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: source } }))
        .status,
      200,
    );
    t.equal(
      (await post('/test-fault/arm', { target: 'destination', fault: 'access-denied', times: 1 })).status,
      200,
    );
    t.equal((await post('/trigger', { id: 'docs' })).status, 200);
    await e.app.runs.idle();
    t.ok(await waitFor(() => inbox.length === 2), 'the failure mailed');
    t.same(inbox[1]!.to, ['ops@example.org']);
    t.match(inbox[1]!.text, /failed/i);

    // Success events under a daily digest: queued, not sent now.
    const rule = await post('/notify/rules', {
      scope: 'global',
      minSeverity: 'info',
      events: ['backup-success'],
      channelIds: [channelId],
      digest: 'daily',
    });
    t.equal(rule.status, 200, rule.text);
    for (let i = 0; i < 2; i++) {
      t.equal((await post('/trigger', { id: 'docs' })).status, 200);
      await e.app.runs.idle();
    }
    await new Promise((r) => setTimeout(r, 300));
    t.equal(inbox.length, 2, 'success events wait for the digest');
    const queued = await e.app.state.settings.list('notify.digest.');
    t.equal(queued.length, 2, 'two digest entries in the state store');

    // Restart: a new engine on the same store sends them as one message once due.
    await e.app.close();
    const again = await startEngine(t, env, opts);
    const other = await startEngine(t, { ...env, ENGINE_DATA_DIR: join(root, 'data2') }, opts);
    const later = new Date(Date.now() + 2 * 86_400_000);
    const sent =
      backend === 'postgres'
        ? await Promise.all([
            again.app.notify.notifier.flushDigests(later),
            other.app.notify.notifier.flushDigests(later),
          ])
        : [await again.app.notify.notifier.flushDigests(later)];
    t.ok(await waitFor(() => inbox.length === 3), 'one digest message');
    await new Promise((r) => setTimeout(r, 300));
    t.equal(inbox.length, 3, 'sent once, not once per engine');
    t.match(inbox[2]!.text, /digest/i);
    t.ok(sent.reduce((a, b) => a + b, 0) >= 1);
    t.equal((await again.app.state.settings.list('notify.digest.')).length, 0, 'the queue is empty');
    const logs = [...e.logs, ...again.logs, ...other.logs].join('');
    t.notOk(logs.includes(SMTP_PASSWORD), 'the SMTP password is never logged');
  });
