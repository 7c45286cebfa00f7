// Delivery against real receivers on loopback: one HTTPS receiver per channel kind (test CA made
// at test time) asserting the exact request each service would get, a real SMTP listener, the
// URL guard held at connect time, redirects, timeouts, retries, and records that carry no secret.
import { createHmac } from 'node:crypto';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import {
  createNotifier,
  type DeliverOptions,
  type DeliveryRecord,
  deliver,
  deliverMessage,
  MemoryDigestStore,
  normaliseChannel,
  type StoredChannel,
  TEST_DETAIL,
  toMessage,
  verifyWebhookSignature,
  viewChannel,
} from '../src/index.ts';
import { makePki, type TestPki } from './helpers/pki.ts';
import { hookResolver, type Receiver, startReceiver, startSmtp } from './helpers/receivers.ts';
import { testBox } from './helpers/secrets.ts';

const KEY = 'GENIEKEY-0123456789-SECRET';
const HMAC_SECRET = 'hmac-signing-secret-0123456789';
const ROUTING = 'R0UT1NGKEYabcdef0123456789abcdef';
const SNOW_PASSWORD = 'snow-password-SECRET-42';

const box = testBox();
const allRecords: DeliveryRecord[] = [];
const allViews: unknown[] = [];
let pki: TestPki;
const receivers: Receiver[] = [];

t.before(() => {
  pki = makePki(tempDir(t, 'coffer-notify-pki-'));
});
t.teardown(async () => {
  for (const r of receivers) await r.close();
});

async function receiver(answer?: Receiver['answer']): Promise<Receiver> {
  const r = await startReceiver(pki, answer);
  receivers.push(r);
  return r;
}

const NAMES = [
  'hooks.example.com',
  'teams.example.com',
  'chat.googleapis.com',
  'events.pagerduty.com',
  'api.example.com',
  'acme.example.com',
];

function options(
  extra: Partial<DeliverOptions> = {},
  calls: string[] = [],
): DeliverOptions & { records: DeliveryRecord[] } {
  const records: DeliveryRecord[] = [];
  return {
    secrets: box,
    resolver: hookResolver(Object.fromEntries(NAMES.map((n) => [n, '127.0.0.1'])), calls),
    ca: pki.caCert,
    record: (r) => {
      records.push(r);
      allRecords.push(r);
    },
    signedAt: 1714528804,
    source: 'coffer-test',
    backoffMs: 20,
    ...extra,
    records,
  };
}

function channel(input: Record<string, unknown>): StoredChannel {
  const c = normaliseChannel({ allowPrivateTarget: true, ...input }, { secrets: box });
  allViews.push(viewChannel(c));
  return c;
}

const failure = {
  event: 'backup-failure' as const,
  jobId: 'j1',
  jobName: 'nightly-db',
  detail: 'run failed: destination unreachable',
  at: '2025-05-01T02:00:04.120Z',
  runId: 'run_1',
};
const TEXT =
  '[critical] Backup failed: job nightly-db (j1) - run failed: destination unreachable (2025-05-01T02:00:04.120Z)';

function common(t: Test, r: Receiver, host: string) {
  t.equal(r.seen.length, 1, 'one request');
  const s = r.seen[0]!;
  t.equal(s.method, 'POST');
  t.equal(s.headers.host, `${host}:${r.port}`, 'Host is the name');
  t.equal(s.servername, host, 'SNI is the name');
  t.equal(s.remoteAddress, '127.0.0.1');
  t.equal(s.headers['user-agent'], 'coffer-notify/1');
  t.equal(s.headers['content-length'], String(Buffer.byteLength(s.body)));
  return s;
}

t.test('generic webhook: JSON document with an HMAC-SHA256 signature the receiver can verify', async (t) => {
  const r = await receiver();
  const c = channel({
    kind: 'webhook',
    url: `https://hooks.example.com:${r.port}/coffer/in?src=1`,
    signingSecret: HMAC_SECRET,
  });
  const o = options();
  const recs = await deliverMessage(toMessage(failure, { id: 'msg-1' }), [c], o);
  t.match(recs, [
    {
      accepted: true,
      status: 202,
      attempt: 1,
      channelKind: 'webhook',
      event: 'backup-failure',
      severity: 'critical',
      test: false,
    },
  ]);
  const s = common(t, r, 'hooks.example.com');
  t.equal(s.path, '/coffer/in?src=1');
  t.equal(s.headers['content-type'], 'application/json');
  t.equal(s.headers['x-coffer-event'], 'backup-failure');
  t.equal(s.headers['x-coffer-delivery'], 'msg-1');
  const expectedSig = createHmac('sha256', HMAC_SECRET).update(`1714528804.${s.body}`).digest('hex');
  t.equal(s.headers['x-coffer-signature'], `t=1714528804,v1=${expectedSig}`);
  const header = s.headers['x-coffer-signature'] as string;
  t.ok(verifyWebhookSignature(HMAC_SECRET, s.body, header, { now: 1714528804 + 60 }), 'verifies');
  t.notOk(
    verifyWebhookSignature(HMAC_SECRET, `${s.body} `, header, { now: 1714528804 }),
    'a changed body fails',
  );
  t.notOk(
    verifyWebhookSignature('another-secret-0123456789', s.body, header, { now: 1714528804 }),
    'another secret fails',
  );
  t.notOk(
    verifyWebhookSignature(HMAC_SECRET, s.body, header, { now: 1714528804 + 301 }),
    'a stale timestamp fails',
  );
  t.same(JSON.parse(s.body), {
    version: 1,
    id: 'msg-1',
    event: 'backup-failure',
    severity: 'critical',
    class: 'problem',
    test: false,
    job: { id: 'j1', name: 'nightly-db' },
    runId: 'run_1',
    at: '2025-05-01T02:00:04.120Z',
    title: 'Backup failed: nightly-db',
    detail: 'run failed: destination unreachable',
    text: TEXT,
  });
  // Without a secret there is no signature header.
  const plain = channel({ kind: 'webhook', url: `https://hooks.example.com:${r.port}/plain` });
  await deliver(failure, [plain], options());
  t.equal(r.seen[1]!.headers['x-coffer-signature'], undefined);
});

t.test('chat incoming-webhook: Slack-compatible text and blocks', async (t) => {
  const r = await receiver(() => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' }));
  const c = channel({ kind: 'chat-webhook', url: `https://hooks.example.com:${r.port}/services/T0/B0/XYZ` });
  const recs = await deliverMessage(
    toMessage({ ...failure, jobName: 'db <prod> & co' }, { id: 'm' }),
    [c],
    options(),
  );
  t.equal(recs[0]!.accepted, true);
  const s = common(t, r, 'hooks.example.com');
  t.equal(s.path, '/services/T0/B0/XYZ');
  t.equal(s.headers['content-type'], 'application/json');
  t.same(JSON.parse(s.body), {
    text: '[critical] Backup failed: job db <prod> & co (j1) - run failed: destination unreachable (2025-05-01T02:00:04.120Z)',
    blocks: [
      { type: 'header', text: { type: 'plain_text', text: '[critical] Backup failed: db <prod> & co' } },
      { type: 'section', text: { type: 'mrkdwn', text: 'run failed: destination unreachable' } },
      {
        type: 'context',
        elements: [
          {
            type: 'mrkdwn',
            text: 'severity *critical* · event `backup-failure` · job db &lt;prod&gt; &amp; co (j1) · 2025-05-01T02:00:04.120Z',
          },
        ],
      },
    ],
  });
});

t.test('chat connector: Teams adaptive card, Google Chat text, or mail', async (t) => {
  const r = await receiver(() => ({ status: 200 }));
  const teams = channel({
    kind: 'chat-connector',
    url: `https://teams.example.com:${r.port}/webhookb2/abc/IncomingWebhook/def`,
  });
  await deliverMessage(toMessage(failure, { id: 'm' }), [teams], options());
  const s = common(t, r, 'teams.example.com');
  t.equal(s.path, '/webhookb2/abc/IncomingWebhook/def');
  t.same(JSON.parse(s.body), {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            {
              type: 'TextBlock',
              size: 'Medium',
              weight: 'Bolder',
              text: '[critical] Backup failed: nightly-db',
              wrap: true,
            },
            { type: 'TextBlock', text: 'run failed: destination unreachable', wrap: true },
            {
              type: 'FactSet',
              facts: [
                { title: 'Severity', value: 'critical' },
                { title: 'Event', value: 'backup-failure' },
                { title: 'Job', value: 'nightly-db (j1)' },
                { title: 'Time', value: '2025-05-01T02:00:04.120Z' },
              ],
            },
          ],
        },
      },
    ],
  });

  const g = await receiver(() => ({ status: 200, body: '{"name":"spaces/x/messages/y"}' }));
  const gchat = channel({
    kind: 'chat-connector',
    url: `https://chat.googleapis.com:${g.port}/v1/spaces/AAA/messages?key=K&token=T`,
  });
  await deliverMessage(toMessage(failure, { id: 'm' }), [gchat], options());
  const gs = common(t, g, 'chat.googleapis.com');
  t.equal(gs.path, '/v1/spaces/AAA/messages?key=K&token=T');
  t.equal(gs.headers['content-type'], 'application/json; charset=UTF-8');
  t.same(JSON.parse(gs.body), {
    text: '*[critical] Backup failed: nightly-db*\nrun failed: destination unreachable\nbackup-failure · job nightly-db (j1) · 2025-05-01T02:00:04.120Z',
  });

  const smtp = await startSmtp();
  t.teardown(() => smtp.close());
  const mailPath = channel({ kind: 'chat-connector', toAddresses: ['channel-abc@teams.example.org'] });
  const recs = await deliver(
    failure,
    [mailPath],
    options({
      email: {
        transport: { host: '127.0.0.1', port: smtp.port, secure: false, ignoreTLS: true },
        from: 'coffer@example.org',
      },
    }),
  );
  t.equal(recs[0]!.accepted, true);
  t.same(smtp.inbox[0]!.to, ['channel-abc@teams.example.org']);
});

t.test(
  'incident routing: PagerDuty Events API v2 trigger, and a recovery resolves the same dedup key',
  async (t) => {
    const r = await receiver(() => ({
      status: 202,
      body: '{"status":"success","message":"Event processed","dedup_key":"x"}',
    }));
    const c = channel({ kind: 'incident', routingKey: ROUTING });
    const o = options({ incidentUrl: `https://events.pagerduty.com:${r.port}/v2/enqueue` });
    await deliverMessage(toMessage(failure, { id: 'm' }), [c], o);
    const s = common(t, r, 'events.pagerduty.com');
    t.equal(s.path, '/v2/enqueue');
    t.equal(s.headers['content-type'], 'application/json');
    t.same(JSON.parse(s.body), {
      routing_key: ROUTING,
      event_action: 'trigger',
      dedup_key: 'coffer:backup:j1',
      payload: {
        summary: TEXT,
        source: 'coffer-test',
        severity: 'critical',
        timestamp: '2025-05-01T02:00:04.120Z',
        class: 'backup-failure',
        custom_details: {
          event: 'backup-failure',
          detail: 'run failed: destination unreachable',
          test: false,
          jobId: 'j1',
          jobName: 'nightly-db',
          runId: 'run_1',
        },
        component: 'nightly-db',
        group: 'j1',
      },
      client: 'Coffer',
    });
    await deliver({ event: 'backup-success', jobId: 'j1', jobName: 'nightly-db', detail: 'run ok' }, [c], o);
    t.same(JSON.parse(r.seen[1]!.body), {
      routing_key: ROUTING,
      event_action: 'resolve',
      dedup_key: 'coffer:backup:j1',
    });
    t.equal(
      o.records.every((x) => x.accepted),
      true,
    );
  },
);

t.test(
  'alert API (Opsgenie and compatible): GenieKey auth, alert with alias; recovery closes by alias',
  async (t) => {
    const r = await receiver(() => ({
      status: 202,
      body: '{"result":"Request will be processed","requestId":"r"}',
    }));
    const c = channel({ kind: 'alert-api', url: `https://api.example.com:${r.port}/v2/alerts`, apiKey: KEY });
    const o = options();
    await deliverMessage(toMessage(failure, { id: 'm' }), [c], o);
    const s = common(t, r, 'api.example.com');
    t.equal(s.path, '/v2/alerts');
    t.equal(s.headers.authorization, `GenieKey ${KEY}`);
    t.same(JSON.parse(s.body), {
      message: '[critical] Backup failed: nightly-db',
      alias: 'coffer:backup:j1',
      description: 'run failed: destination unreachable',
      priority: 'P1',
      source: 'coffer-test',
      tags: ['coffer', 'backup-failure', 'critical'],
      details: {
        event: 'backup-failure',
        severity: 'critical',
        at: '2025-05-01T02:00:04.120Z',
        jobId: 'j1',
        jobName: 'nightly-db',
      },
      entity: 'nightly-db',
    });
    await deliverMessage(
      toMessage(
        { event: 'backup-success', jobId: 'j1', at: '2025-05-02T02:00:00.000Z', detail: 'run ok' },
        { id: 'm2' },
      ),
      [c],
      o,
    );
    const close = r.seen[1]!;
    t.equal(close.path, '/v2/alerts/coffer%3Abackup%3Aj1/close?identifierType=alias');
    t.equal(close.headers.authorization, `GenieKey ${KEY}`);
    t.same(JSON.parse(close.body), {
      source: 'coffer-test',
      note: '[info] Backup succeeded: job j1 - run ok (2025-05-02T02:00:00.000Z)',
    });
  },
);

t.test(
  'IT-service events (ServiceNow): HTTP Basic, em/jsonv2 records; recovery clears with severity 0',
  async (t) => {
    const r = await receiver(() => ({
      status: 200,
      body: '{"result":{"Default Bulk Endpoint":"1 events were inserted"}}',
    }));
    const c = channel({
      kind: 'itsm-event',
      url: `https://acme.example.com:${r.port}/api/global/em/jsonv2`,
      username: 'coffer.integration',
      apiKey: SNOW_PASSWORD,
    });
    const o = options();
    await deliverMessage(toMessage(failure, { id: 'm' }), [c], o);
    const s = common(t, r, 'acme.example.com');
    t.equal(s.path, '/api/global/em/jsonv2');
    t.equal(s.headers.accept, 'application/json');
    t.equal(
      s.headers.authorization,
      `Basic ${Buffer.from(`coffer.integration:${SNOW_PASSWORD}`).toString('base64')}`,
    );
    t.same(JSON.parse(s.body), {
      records: [
        {
          source: 'Coffer',
          event_class: 'coffer',
          node: 'coffer-test',
          resource: 'nightly-db',
          type: 'backup-failure',
          metric_name: 'backup-failure',
          severity: '1',
          message_key: 'coffer:backup:j1',
          description: TEXT,
          time_of_event: '2025-05-01 02:00:04',
          additional_info: JSON.stringify({
            event: 'backup-failure',
            severity: 'critical',
            test: false,
            jobId: 'j1',
            runId: 'run_1',
          }),
        },
      ],
    });
    await deliver({ event: 'backup-success', jobId: 'j1', jobName: 'nightly-db', detail: 'run ok' }, [c], o);
    const clear = JSON.parse(r.seen[1]!.body).records[0];
    t.equal(clear.severity, '0');
    t.equal(clear.message_key, 'coffer:backup:j1');
  },
);

t.test('email through nodemailer to a real SMTP listener; 4xx retried, 5xx final', async (t) => {
  const smtp = await startSmtp();
  t.teardown(() => smtp.close());
  const email = {
    transport: { host: '127.0.0.1', port: smtp.port, secure: false, ignoreTLS: true },
    from: 'Coffer <coffer@example.org>',
  };
  const c = channel({ kind: 'email', toAddresses: ['ops@example.org', 'dba@example.org'] });
  const o = options({ email });
  const recs = await deliver(failure, [c], o);
  t.match(recs, [{ accepted: true, channelKind: 'email', attempt: 1 }]);
  const m = smtp.inbox[0]!;
  t.equal(m.from, 'coffer@example.org');
  t.same(m.to, ['ops@example.org', 'dba@example.org']);
  t.match(m.raw, /^Subject: \[Coffer\] critical: Backup failed: nightly-db$/m);
  t.match(m.raw, /run failed: destination unreachable/);
  t.match(m.raw, /Event: backup-failure/);
  t.match(m.raw, /Job: nightly-db \(j1\)/);
  t.match(m.raw, /Time: 2025-05-01T02:00:04\.120Z/);

  smtp.refuseWith = 550;
  const refused = await deliver(failure, [c], options({ email }));
  t.match(refused, [
    {
      accepted: false,
      status: 550,
      willRetry: false,
      error: { code: 'ERR_NOTIFY_EMAIL', message: 'mail server answered 550' },
    },
  ]);
  smtp.refuseWith = 451;
  const later = await deliver(failure, [c], options({ email, retries: 1 }));
  t.match(later, [
    { accepted: false, status: 451, willRetry: true },
    { accepted: false, attempt: 2, willRetry: false },
  ]);
  smtp.refuseWith = undefined;
  const none = await deliver(failure, [c], options());
  t.match(none, [{ accepted: false, error: { code: 'ERR_NOTIFY_NOT_CONFIGURED' } }]);
});

t.test(
  'connect time: a public-looking name answering 127.0.0.1 is refused unless allowPrivateTarget',
  async (t) => {
    const r = await receiver();
    const url = `https://hooks.example.com:${r.port}/hook`;
    const guarded = normaliseChannel({ kind: 'webhook', url }, { secrets: box }); // passes the save check
    t.equal(guarded.allowPrivateTarget, false);
    const calls: string[] = [];
    const refused = await deliver(failure, [guarded], options({}, calls));
    t.match(refused, [
      { accepted: false, attempt: 1, willRetry: false, error: { code: 'ERR_NOTIFY_URL_REFUSED' } },
    ]);
    t.equal(r.connections, 0, 'no connection was made');
    t.same(calls, ['hooks.example.com']);

    const allowed = channel({ kind: 'webhook', url });
    const calls2: string[] = [];
    const ok = await deliver(failure, [allowed], options({}, calls2));
    t.match(ok, [{ accepted: true }]);
    t.same(
      calls2,
      ['hooks.example.com'],
      'resolved once; the socket never asked DNS again (the name has no real record)',
    );
  },
);

t.test('connect time: the socket goes to the checked address, no second lookup (rebinding)', async (t) => {
  const r = await receiver();
  let n = 0;
  // First answer 127.0.0.1 (the receiver); any later answer 127.0.0.2 (nothing listens there).
  const resolver = async () => [{ address: n++ === 0 ? '127.0.0.1' : '127.0.0.2', family: 4 as const }];
  const c = channel({ kind: 'webhook', url: `https://hooks.example.com:${r.port}/x` });
  const recs = await deliver(failure, [c], options({ resolver }));
  t.match(recs, [{ accepted: true }]);
  t.equal(n, 1, 'one lookup');
  t.equal(r.seen.length, 1);
});

t.test('redirects are not followed (302 to a private address)', async (t) => {
  const inner = await receiver();
  const r = await receiver(() => ({
    status: 302,
    headers: { location: `https://127.0.0.1:${inner.port}/internal` },
  }));
  const c = channel({ kind: 'webhook', url: `https://hooks.example.com:${r.port}/x` });
  const recs = await deliver(failure, [c], options());
  t.match(recs, [
    { accepted: false, status: 302, attempt: 1, willRetry: false, error: { code: 'ERR_NOTIFY_REDIRECT' } },
  ]);
  t.equal(recs.length, 1);
  t.equal(inner.seen.length, 0, 'the redirect target got nothing');
  t.equal(inner.connections, 0);
});

t.test(
  'a receiver that never answers times out at about 5 s without holding up the other channels',
  async (t) => {
    const hang = await receiver(() => 'hang');
    const good = await receiver();
    const slow = channel({ kind: 'webhook', url: `https://hooks.example.com:${hang.port}/x` });
    const fast = channel({ kind: 'chat-webhook', url: `https://hooks.example.com:${good.port}/y` });
    const arrived: { rec: DeliveryRecord; ms: number }[] = [];
    const start = Date.now();
    const o = options({ retries: 0 });
    const inner = o.record!;
    o.record = (rec) => {
      inner(rec);
      arrived.push({ rec, ms: Date.now() - start });
    };
    await deliver(failure, [slow, fast], o);
    const f = arrived.find((a) => a.rec.channelId === fast.id)!;
    const s = arrived.find((a) => a.rec.channelId === slow.id)!;
    t.equal(f.rec.accepted, true);
    t.ok(f.ms < 1000, `the good channel was done in ${f.ms} ms`);
    t.match(s.rec, {
      accepted: false,
      error: { code: 'ERR_NOTIFY_TIMEOUT', message: 'no answer within 5000 ms' },
    });
    t.ok(s.ms >= 4900 && s.ms < 6500, `timed out after ${s.ms} ms`);
  },
);

t.test(
  'transient failures are retried with backoff and each attempt recorded; 4xx and TLS are final',
  async (t) => {
    const flaky = await receiver((_req, i) => (i < 2 ? { status: 503 } : { status: 202 }));
    const c = channel({ kind: 'webhook', url: `https://hooks.example.com:${flaky.port}/x` });
    const recs = await deliverMessage(toMessage(failure, { id: 'msg-r' }), [c], options({ backoffMs: 30 }));
    t.match(recs, [
      {
        attempt: 1,
        accepted: false,
        status: 503,
        willRetry: true,
        error: { code: 'ERR_NOTIFY_HTTP_STATUS', message: 'receiver answered 503' },
      },
      { attempt: 2, accepted: false, status: 503, willRetry: true },
      { attempt: 3, accepted: true, status: 202, willRetry: false },
    ]);
    t.same(
      new Set(flaky.seen.map((s) => s.headers['x-coffer-delivery'])),
      new Set(['msg-r']),
      'one delivery id across attempts',
    );
    t.ok(flaky.seen[2]!.at - flaky.seen[0]!.at >= 30 + 120, 'backoff 30 ms then 120 ms');

    const rejecting = await receiver(() => ({ status: 400 }));
    const bad = channel({ kind: 'webhook', url: `https://hooks.example.com:${rejecting.port}/x` });
    t.match(await deliver(failure, [bad], options()), [{ attempt: 1, status: 400, willRetry: false }]);
    t.equal(rejecting.seen.length, 1);

    const limited = await receiver((_r, i) => (i === 0 ? { status: 429 } : { status: 200 }));
    const lim = channel({ kind: 'webhook', url: `https://hooks.example.com:${limited.port}/x` });
    t.match(await deliver(failure, [lim], options()), [{ status: 429, willRetry: true }, { accepted: true }]);

    const closed = await receiver();
    await closed.close();
    receivers.splice(receivers.indexOf(closed), 1);
    const gone = channel({ kind: 'webhook', url: `https://hooks.example.com:${closed.port}/x` });
    t.match(await deliver(failure, [gone], options({ retries: 1 })), [
      {
        attempt: 1,
        willRetry: true,
        error: { code: 'ERR_NOTIFY_CONNECT', message: 'connection failed (ECONNREFUSED)' },
      },
      { attempt: 2, willRetry: false },
    ]);

    const tlsr = await receiver();
    const untrusted = channel({ kind: 'webhook', url: `https://hooks.example.com:${tlsr.port}/x` });
    const { ca: _ca, ...noCa } = options();
    t.match(await deliver(failure, [untrusted], noCa), [
      { attempt: 1, willRetry: false, error: { code: 'ERR_NOTIFY_TLS' } },
    ]);
    t.equal(tlsr.seen.length, 0);
  },
);

t.test('one channel failing does not stop the others (unopenable secret, refused URL, good)', async (t) => {
  const r = await receiver();
  const good = channel({ kind: 'webhook', url: `https://hooks.example.com:${r.port}/x` });
  const broken: StoredChannel = { ...good, id: 'broken', apiKey: undefined, url: 'sealed:garbage' };
  const refused = normaliseChannel(
    { kind: 'webhook', url: `https://hooks.example.com:${r.port}/y` },
    { secrets: box },
  );
  const o = options();
  const recs = await deliver(failure, [broken, refused, good], o);
  t.equal(recs.length, 3);
  t.match(
    recs.find((x) => x.channelId === 'broken'),
    { accepted: false, error: { code: 'ERR_NOTIFY_SECRET' } },
  );
  t.match(
    recs.find((x) => x.channelId === refused.id),
    { accepted: false, error: { code: 'ERR_NOTIFY_URL_REFUSED' } },
  );
  t.match(
    recs.find((x) => x.channelId === good.id),
    { accepted: true },
  );
  const throwingSink = await deliver(failure, [good], {
    ...o,
    record: () => {
      throw new Error('sink down');
    },
  });
  t.equal(throwingSink[0]!.accepted, true, 'a throwing record sink does not stop delivery');
});

t.test(
  'the notifier: test sends are recorded as tests; a failing run reaches each winning channel once',
  async (t) => {
    const a = await receiver();
    const b = await receiver();
    const ca = channel({ kind: 'webhook', url: `https://hooks.example.com:${a.port}/a` });
    const cb = channel({ kind: 'chat-webhook', url: `https://hooks.example.com:${b.port}/b` });
    const rules = [
      {
        id: 'r1',
        scope: 'global' as const,
        minSeverity: 'warning' as const,
        events: 'all' as const,
        channelIds: [ca.id, cb.id],
        digest: 'off' as const,
      },
      {
        id: 'r2',
        scope: 'global' as const,
        minSeverity: 'critical' as const,
        events: ['backup-failure' as const],
        channelIds: [ca.id, 'deleted'],
        digest: 'off' as const,
      },
    ];
    const o = options();
    const notifier = createNotifier({
      ...o,
      load: () => ({ channels: [ca, cb], rules }),
      digestStore: new MemoryDigestStore(),
    });
    const started = Date.now();
    const outcome = await notifier.notify(failure);
    t.ok(Date.now() - started < 1000, 'delivered within a second');
    t.same(outcome.now, [ca.id, cb.id]);
    t.equal(outcome.records.length, 2);
    t.equal(a.seen.length, 1, 'one delivery per winning channel');
    t.equal(b.seen.length, 1);

    const test = await notifier.test(cb);
    t.match(test, [
      { test: true, event: 'notification-test', severity: 'info', accepted: true, detail: TEST_DETAIL },
    ]);
    t.match(JSON.parse(b.seen[1]!.body).blocks[2].elements[0].text, /· test$/);

    const smtp = await startSmtp();
    t.teardown(() => smtp.close());
    const mailer = createNotifier({
      ...o,
      email: {
        transport: { host: '127.0.0.1', port: smtp.port, secure: false, ignoreTLS: true },
        from: 'coffer@example.org',
      },
      load: () => ({ channels: [], rules: [] }),
      digestStore: new MemoryDigestStore(),
    });
    t.match(await mailer.testEmail('owner@example.org'), [
      { test: true, accepted: true, channelKind: 'email' },
    ]);
    t.same(smtp.inbox[0]!.to, ['owner@example.org']);
    t.match(smtp.inbox[0]!.raw, /This is a test notification\./);
    t.same(await mailer.testEmail('not an address'), []);
    t.same(
      (await mailer.notify({ event: 'nope' as 'backup-failure' })).now,
      [],
      'an unknown event routes nowhere, no throw',
    );
  },
);

t.test('no record, error or view carries a secret, a URL path or a body', async (t) => {
  t.ok(allRecords.length > 30, `${allRecords.length} records checked`);
  const text = JSON.stringify([allRecords, allViews]);
  for (const secret of [
    KEY,
    HMAC_SECRET,
    ROUTING,
    SNOW_PASSWORD,
    '/services/T0',
    'webhookb2',
    'token=T',
    '/coffer/in',
    'sealed:',
  ]) {
    t.notOk(text.includes(secret), `no ${secret.slice(0, 12)}…`);
  }
  for (const r of allRecords) if (r.error) t.match(r.error.message, /^[a-z0-9 ();:_A-Z.,-]+$/i);
});
