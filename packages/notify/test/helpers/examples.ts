/**
 * The example requests docs/notifications.md shows, one per channel kind (and the recoveries),
 * built with the package itself from fixed inputs; test/docs.test.ts checks the document shows
 * exactly these.
 */
import {
  buildMail,
  buildRequest,
  type HttpRequest,
  type MailMessage,
  type OpenChannel,
  toMessage,
} from '../../src/index.ts';

export const EXAMPLE_NOTIFICATION = {
  event: 'backup-failure' as const,
  jobId: 'job_7Hq2',
  jobName: 'nightly-db',
  detail: 'run failed: destination unreachable',
  at: '2025-05-01T02:00:04.120Z',
  runId: 'run_01HX',
};

export function examples(): Record<string, HttpRequest | MailMessage> {
  const m = toMessage(EXAMPLE_NOTIFICATION, { id: '6f1c0b7e-2f1e-4d7a-9a51-0d3c1f2a9b10' });
  const ok = toMessage(
    {
      event: 'backup-success',
      jobId: 'job_7Hq2',
      jobName: 'nightly-db',
      detail: 'run ok',
      at: '2025-05-02T02:00:03.004Z',
    },
    { id: '0b5c8d1e-3a2b-4c4d-8e9f-a1b2c3d4e5f6' },
  );
  const o = { source: 'coffer.example.org', signedAt: 1746064804 };
  const ch = (c: OpenChannel) => c;
  return {
    webhook: buildRequest(
      ch({
        kind: 'webhook',
        url: 'https://hooks.example.org/coffer',
        signingSecret: 'whsec-example-0123456789',
      }),
      m,
      o,
    ),
    'chat-webhook': buildRequest(
      ch({ kind: 'chat-webhook', url: 'https://hooks.slack.com/services/T0000/B0000/XXXXXXXX' }),
      m,
      o,
    ),
    'chat-connector (Microsoft Teams)': buildRequest(
      ch({
        kind: 'chat-connector',
        url: 'https://example.webhook.office.com/webhookb2/aaaa/IncomingWebhook/bbbb/cccc',
      }),
      m,
      o,
    ),
    'chat-connector (Google Chat)': buildRequest(
      ch({
        kind: 'chat-connector',
        url: 'https://chat.googleapis.com/v1/spaces/AAAA/messages?key=KEY&token=TOKEN',
      }),
      m,
      o,
    ),
    incident: buildRequest(ch({ kind: 'incident', routingKey: 'R0123456789abcdef0123456789abcdef' }), m, o),
    'incident (recovery)': buildRequest(
      ch({ kind: 'incident', routingKey: 'R0123456789abcdef0123456789abcdef' }),
      ok,
      o,
    ),
    'alert-api': buildRequest(
      ch({
        kind: 'alert-api',
        url: 'https://api.opsgenie.com/v2/alerts',
        apiKey: 'eb243592-faa2-4ba2-a551-1afdf565c889',
      }),
      m,
      o,
    ),
    'alert-api (recovery)': buildRequest(
      ch({
        kind: 'alert-api',
        url: 'https://api.opsgenie.com/v2/alerts',
        apiKey: 'eb243592-faa2-4ba2-a551-1afdf565c889',
      }),
      ok,
      o,
    ),
    'itsm-event': buildRequest(
      ch({
        kind: 'itsm-event',
        url: 'https://acme.service-now.com/api/global/em/jsonv2',
        username: 'coffer.integration',
        apiKey: 'example-password',
      }),
      m,
      o,
    ),
    email: buildMail(m, ['ops@example.org']),
  };
}

/** The Markdown a request is shown as. */
export function render(x: HttpRequest | MailMessage): string {
  if ('method' in x) {
    const headers = Object.entries(x.headers).map(([k, v]) => `${k}: ${v}`);
    return [
      '```http',
      `${x.method} ${x.url}`,
      ...headers,
      '',
      JSON.stringify(JSON.parse(x.body), null, 2),
      '```',
    ].join('\n');
  }
  return ['```text', `To: ${x.to.join(', ')}`, `Subject: ${x.subject}`, '', x.text.trimEnd(), '```'].join(
    '\n',
  );
}
