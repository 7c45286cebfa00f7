// docs/notifications.md stays in step with the package: the 23 events with their severity, class
// and "fires when"; every error code and nothing else; the preview domains; and each example
// request exactly as the package builds it.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import {
  EVENT_INFO,
  NOTIFY_ERROR_CODES,
  NOTIFY_EVENTS,
  PREVIEW_DOMAINS,
  verifyWebhookSignature,
} from '../src/index.ts';
import { examples, render } from './helpers/examples.ts';

const doc = readFileSync(fileURLToPath(new URL('../../../docs/notifications.md', import.meta.url)), 'utf8');

function section(title: string): string {
  const start = doc.indexOf(`\n## ${title}`);
  const next = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, next < 0 ? undefined : next);
}

t.test(
  'the closed set has 23 events, each documented with its severity, class and when it fires',
  async (t) => {
    t.equal(NOTIFY_EVENTS.length, 23);
    const rows = [...section('Events').matchAll(/^\| `([a-z-]+)` \| (\w+) \| (\w+) \| (.+) \|$/gm)];
    t.same(
      rows.map((r) => r[1]),
      NOTIFY_EVENTS,
      'one row per event, in order',
    );
    for (const r of rows) {
      const info = EVENT_INFO[r[1] as keyof typeof EVENT_INFO];
      t.same([r[2], r[3], r[4]], [info.severity, info.class, info.firesWhen], r[1]!);
    }
    t.ok(
      NOTIFY_EVENTS.includes('backup-failure') && NOTIFY_EVENTS.includes('backup-stale'),
      'the two named by the spec',
    );
  },
);

t.test('every error code is documented, and nothing else', async (t) => {
  const s = section('Error codes');
  for (const code of NOTIFY_ERROR_CODES) t.match(s, `| \`${code}\` |`, code);
  const listed = [...s.matchAll(/^\| `(ERR_NOTIFY_[A-Z_]+)` \|/gm)].map((m) => m[1]);
  t.same(listed.sort(), [...NOTIFY_ERROR_CODES].sort());
});

t.test('the preview domain list is the one the guard uses', async (t) => {
  const s = section('The URL guard');
  for (const d of PREVIEW_DOMAINS) t.match(s, `\`${d}\``, d);
});

t.test('each example request is exactly what the package builds', async (t) => {
  const ex = examples();
  const shown = [...doc.matchAll(/<!-- example: (.+?) -->\n(```[\s\S]*?```)/g)];
  t.same(
    shown.map((m) => m[1]),
    Object.keys(ex),
    'one example per kind and recovery',
  );
  for (const m of shown) t.equal(m[2], render(ex[m[1]!]!), m[1]!);
  const webhook = ex.webhook!;
  if ('body' in webhook)
    t.ok(
      verifyWebhookSignature(
        'whsec-example-0123456789',
        webhook.body,
        webhook.headers['x-coffer-signature']!,
        {
          now: 1746064804,
        },
      ),
      'the shown signature verifies',
    );
});
