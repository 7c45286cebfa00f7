// Notifications through a started engine, to a real HTTPS receiver on loopback (a test CA the
// engine trusts through ENGINE_NOTIFY_CA_FILE): channel writes validated, sealed and audited
// without a URL or secret; the first channel's automatic rules; a failing run delivers exactly one
// notification per winning channel within a second; a receiver that never answers neither slows
// the run nor stops another channel; the test send and the history; the private-target switch is
// an owner's; refusals for lack of notify.config audited; a delete of a missing id writes no row.

import { writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { verifyWebhookSignature } from '@coffer/notify';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { makePki } from '../helpers/tls.ts';
import { writeTree } from '../runs/helpers/world.ts';

const CONSOLE = 'https://console.coffer.test';
const SIGNING = 'whsec-test-signing-secret-0123456789';

interface Hit {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}

async function receiver(
  t: { teardown(fn: () => unknown): void },
  pki: ReturnType<typeof makePki>,
  hang = false,
) {
  const hits: Hit[] = [];
  const server = createServer({ cert: pki.cert, key: pki.key }, async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    hits.push({
      path: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      at: Date.now(),
    });
    if (hang) return; // never answers
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { hits, url: `https://localhost:${(server.address() as AddressInfo).port}` };
}

t.test('notifications end to end', async (t) => {
  const root = tempDir(t, 'coffer-notify-');
  const pki = makePki(root);
  writeFileSync(join(root, 'ca.pem'), pki.caCert);
  writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha' });
  const e = await startEngine(
    t,
    {
      CONSOLE_ORIGIN: CONSOLE,
      ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
      ENGINE_NOTIFY_CA_FILE: join(root, 'ca.pem'),
      HARNESS_TEST_FAULTS: '1',
    },
    { rateLimit: { max: 1000, windowSeconds: 60 }, notify: { timeoutMs: 1500, backoffMs: 50 } },
  );
  const post = (path: string, body: unknown, headers: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers, body });
  const get = (path: string, headers: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers });
  const good = await receiver(t, pki);
  const slow = await receiver(t, pki, true);

  // Save-time refusals: plain http, credentials in the authority, a private address without the opt-in.
  for (const [url, refusal] of [
    [`http://localhost/hook`, 'not-https'],
    [`https://user:pw@example.com/hook`, 'credentials'],
    [`${good.url}/hook`, undefined],
  ] as const) {
    const r = await post('/notify/channels', { kind: 'webhook', name: 'x', url });
    t.equal(r.status, 400, `${url} refused`);
    t.notMatch(r.text, /user:pw|\/hook/, 'the refusal never quotes the URL');
    if (refusal) t.match(r.json(), { code: 'ERR_NOTIFY_URL_REFUSED' });
  }

  // An operator (notify.config) may not open the private-target switch; the owner may.
  await e.app.state.roles.assign({
    subject: passkeySubject('op@example.org'),
    email: 'op@example.org',
    role: 'operator',
    grantedBy: 'test',
  });
  const op = await e.app.sessions.mint({
    subject: passkeySubject('op@example.org'),
    email: 'op@example.org',
    method: 'passkey',
  });
  const opHeaders = { cookie: `${SESSION_COOKIE}=${op.token}`, origin: CONSOLE };
  const opTry = await post(
    '/notify/channels',
    { kind: 'webhook', name: 'x', url: `${good.url}/hook`, allowPrivateTarget: true },
    opHeaders,
  );
  t.equal(opTry.status, 403);
  t.match(opTry.json(), { error: 'forbidden', required: 'owner', have: 'operator' });

  const created = await post('/notify/channels', {
    kind: 'webhook',
    name: 'Ops hook',
    url: `${good.url}/hook/secret-path-token`,
    signingSecret: SIGNING,
    allowPrivateTarget: true,
    routingKey: 'dropped-foreign-field',
  });
  t.equal(created.status, 200, created.text);
  const channel = created.json().channel;
  t.same(Object.keys(created.json().channel.url), ['set', 'origin']);
  t.equal(channel.url.origin, good.url);
  t.same(channel.signingSecret, { set: true });
  t.notOk('routingKey' in channel, 'a foreign field is dropped');
  t.same(
    created.json().rulesCreated.map((r: { id: string }) => r.id),
    ['rule_backup-failure', 'rule_backup-stale'],
    'the first channel gets the two global rules',
  );
  const stored = JSON.stringify(await e.app.state.notifications.getChannel(channel.id));
  t.notMatch(
    stored,
    /secret-path-token|whsec-test/,
    'the store holds the URL path and the secret sealed only',
  );

  // Nor may the operator re-point a channel that has the switch on (the owner set it for one target).
  const repoint = await post(
    '/notify/channels/update',
    { id: channel.id, url: 'https://10.0.0.5/x' },
    opHeaders,
  );
  t.equal(repoint.status, 403, 'an operator cannot change the URL of a private-target channel');
  t.equal(
    (await post('/notify/channels/update', { id: channel.id, name: 'Ops hook' }, opHeaders)).status,
    200,
    'other fields stay theirs',
  );

  const slowCh = (
    await post('/notify/channels', {
      kind: 'webhook',
      name: 'Slow hook',
      url: `${slow.url}/hang`,
      allowPrivateTarget: true,
    })
  ).json().channel;
  t.equal(
    (await post('/notify/rules/update', { id: 'rule_backup-failure', channelIds: [channel.id, slowCh.id] }))
      .status,
    200,
  );
  const listed = (await get('/notify/channels')).json();
  t.equal(listed.channels.length, 2);
  t.same(listed.nowhere, []);
  t.notMatch(
    JSON.stringify(listed),
    /secret-path-token|whsec-test|\/hang/,
    'the read shows no secret or path',
  );

  // A failing run: one delivery per winning channel, fast; the hanging receiver does not slow it.
  t.equal(
    (
      await post('/jobs', {
        id: 'docs',
        name: 'Team docs',
        cadenceSeconds: 3600,
        source: { type: 'files', path: source },
      })
    ).status,
    200,
  );
  t.equal(
    (await post('/test-fault/arm', { target: 'destination', fault: 'access-denied', times: 0 })).status,
    200,
  );
  const started = Date.now();
  const trig = await post('/trigger', { id: 'docs' });
  t.equal(trig.status, 200);
  await e.app.runs.idle();
  const runDone = Date.now();
  for (let i = 0; i < 100 && good.hits.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(good.hits.length, 1, 'exactly one delivery to the good channel');
  const hit = good.hits[0]!;
  t.ok(hit.at - runDone < 1000, `delivered within a second of the run settling (${hit.at - runDone} ms)`);
  t.equal(hit.path, '/hook/secret-path-token');
  const body = JSON.parse(hit.body);
  t.match(body, { event: 'backup-failure', severity: 'critical', job: { id: 'docs', name: 'Team docs' } });
  t.ok(
    verifyWebhookSignature(SIGNING, hit.body, String(hit.headers['x-coffer-signature'])),
    'the HMAC signature verifies with the channel secret',
  );
  t.equal(slow.hits.length, 1, 'the hanging receiver got its request too');
  t.ok(runDone - started < 10_000, 'the run settled without waiting on any receiver');
  const runs = (await get('/history?id=docs')).json().runs;
  t.equal(runs[0].status, 'failed');

  // Wait for the slow channel's attempts to end (timeout 1.5 s, 2 retries), then the history.
  let records: { channelId: string; accepted: boolean; test: boolean; detail: string }[] = [];
  for (let i = 0; i < 100; i++) {
    records = (await get('/notify/history')).json().records;
    if (records.filter((r) => r.channelId === slowCh.id).length >= 3) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(records.filter((r) => r.channelId === channel.id && r.accepted).length, 1, 'one accepted record');
  t.equal(
    records.filter((r) => r.channelId === slowCh.id && !r.accepted).length,
    3,
    'three timed-out attempts recorded',
  );
  t.match(records.find((r) => r.channelId === slowCh.id)?.detail, /ERR_NOTIFY_TIMEOUT/);

  // The test send.
  const before = good.hits.length;
  const test = await post('/notify/test', { channelId: channel.id });
  t.equal(test.status, 200, test.text);
  t.equal(good.hits.length, before + 1);
  t.match(JSON.parse(good.hits.at(-1)!.body), { event: 'notification-test', severity: 'info' });
  t.ok(
    (await get('/notify/history')).json().records.some((r: { test: boolean }) => r.test),
    'recorded as a test',
  );
  t.equal((await post('/notify/test', { channelId: 'nope' })).status, 404);

  // Refusals for lack of notify.config are audited; a viewer cannot read the channels.
  await e.app.state.roles.assign({
    subject: passkeySubject('v@example.org'),
    email: 'v@example.org',
    role: 'viewer',
    grantedBy: 'test',
  });
  const v = await e.app.sessions.mint({
    subject: passkeySubject('v@example.org'),
    email: 'v@example.org',
    method: 'passkey',
  });
  const vHeaders = { cookie: `${SESSION_COOKIE}=${v.token}`, origin: CONSOLE };
  t.equal(
    (await post('/notify/channels', { kind: 'webhook', name: 'x', url: 'https://example.com/' }, vHeaders))
      .status,
    403,
  );
  t.equal((await get('/notify/channels', vHeaders)).status, 403);

  // Deletes: an existing id audited, a missing one not.
  t.same((await post('/notify/channels/delete', { id: slowCh.id })).json(), { ok: true, deleted: true });
  t.same((await post('/notify/channels/delete', { id: slowCh.id })).json(), { ok: true, deleted: false });
  t.same((await post('/notify/rules/delete', { id: 'no-such-rule' })).json(), { ok: true, deleted: false });

  const audit = (await get('/audit?action=notify-channel-change&limit=100')).json();
  const rows = (audit.events ?? audit.rows ?? audit.items ?? []) as {
    outcome: string;
    detail: { change?: string };
  }[];
  const text = JSON.stringify(audit);
  t.notMatch(
    text,
    /secret-path-token|whsec-test|localhost:\d+|\/hang/,
    'no URL, path or secret in audit rows',
  );
  t.ok(
    rows.some((r) => r.outcome === 'refused'),
    'the viewer refusal is audited',
  );
  t.equal(
    rows.filter((r) => r.outcome === 'applied' && r.detail.change === 'delete').length,
    1,
    'one delete row only',
  );
  t.notMatch(e.logs.join(''), /secret-path-token|whsec-test/, 'no secret or path in the logs');
});
