// Channels: each kind keeps only its own transport fields, secrets and URLs are sealed and
// write-only, the read shape shows no secret, and invalid inputs fail with stable codes.
import t from 'tap';
import {
  CHANNEL_KINDS,
  channelSummary,
  isNotifyError,
  normaliseChannel,
  openChannel,
  viewChannel,
} from '../src/index.ts';
import { testBox } from './helpers/secrets.ts';

const KEY = 'GENIEKEY-0123456789-SECRET';
const HMAC = 'hmac-signing-secret-0123456789';
const ROUTING = 'R0UT1NGKEYabcdef0123456789abcdef';
const HOOK = 'https://hooks.example.com/services/T0/B0/SECRETPATH';

const everything = {
  name: 'all fields',
  toAddresses: ['ops@example.org'],
  url: HOOK,
  username: 'svc-coffer',
  routingKey: ROUTING,
  apiKey: KEY,
  signingSecret: HMAC,
  extra: 'dropped',
  token: 'dropped',
};

t.test('each kind keeps only its own transport fields; foreign fields are dropped', async (t) => {
  const box = testBox();
  const expect: Record<string, string[]> = {
    email: ['toAddresses'],
    webhook: ['url', 'urlOrigin', 'signingSecret'],
    'chat-webhook': ['url', 'urlOrigin'],
    incident: ['routingKey'],
    'alert-api': ['url', 'urlOrigin', 'apiKey'],
    'itsm-event': ['url', 'urlOrigin', 'username', 'apiKey'],
  };
  for (const [kind, fields] of Object.entries(expect)) {
    const c = normaliseChannel({ ...everything, kind }, { secrets: box });
    t.same(
      Object.keys(c).sort(),
      ['id', 'name', 'kind', 'enabled', 'allowPrivateTarget', ...fields].sort(),
      `${kind} stores ${fields.join(', ')}`,
    );
    t.match(c.id, /^ch_[A-Za-z0-9_-]{16}$/);
    t.equal(c.enabled, true);
    t.equal(c.allowPrivateTarget, false);
  }
  t.equal(CHANNEL_KINDS.length, 7);
});

t.test('secrets and URLs are sealed; openChannel gets them back; the view shows { set: true }', async (t) => {
  const box = testBox();
  const c = normaliseChannel(
    { kind: 'itsm-event', name: 'snow', url: HOOK, username: 'svc', apiKey: KEY },
    { secrets: box },
  );
  t.notMatch(JSON.stringify(c), /SECRETPATH|GENIEKEY/, 'nothing stored in the clear');
  t.equal(c.urlOrigin, 'https://hooks.example.com');
  const open = openChannel(c, box);
  t.equal(open.url, HOOK);
  t.equal(open.apiKey, KEY);
  const v = viewChannel(c);
  t.same(v, {
    id: c.id,
    name: 'snow',
    kind: 'itsm-event',
    enabled: true,
    allowPrivateTarget: false,
    url: { set: true, origin: 'https://hooks.example.com' },
    username: 'svc',
    apiKey: { set: true },
  });
  const inc = normaliseChannel({ kind: 'incident', routingKey: ROUTING }, { secrets: box });
  t.same(viewChannel(inc).routingKey, { set: true });
  t.notMatch(JSON.stringify(inc), new RegExp(ROUTING));
  t.same(channelSummary(c), { id: c.id, name: 'snow', kind: 'itsm-event', enabled: true });
});

t.test('an update keeps omitted secrets and the URL; null clears the optional signing secret', async (t) => {
  const box = testBox();
  const first = normaliseChannel({ kind: 'webhook', url: HOOK, signingSecret: HMAC }, { secrets: box });
  const renamed = normaliseChannel({ name: 'renamed' }, { secrets: box, previous: first });
  t.equal(renamed.id, first.id);
  t.equal(renamed.url, first.url, 'sealed url kept');
  t.equal(renamed.signingSecret, first.signingSecret, 'sealed secret kept');
  t.equal(renamed.name, 'renamed');
  const cleared = normaliseChannel({ signingSecret: null }, { secrets: box, previous: first });
  t.equal(cleared.signingSecret, undefined);
  const rekeyed = normaliseChannel(
    { signingSecret: 'another-secret-0123456789' },
    { secrets: box, previous: first },
  );
  t.equal(openChannel(rekeyed, box).signingSecret, 'another-secret-0123456789');
  t.throws(() => normaliseChannel({ kind: 'email' }, { secrets: box, previous: first }), {
    code: 'ERR_NOTIFY_INVALID_CHANNEL',
    field: 'kind',
  });
  // Turning the private opt-in off re-checks the kept URL.
  const priv = normaliseChannel(
    { kind: 'webhook', url: 'https://10.0.0.8/hook', allowPrivateTarget: true },
    { secrets: box },
  );
  t.throws(() => normaliseChannel({ allowPrivateTarget: false }, { secrets: box, previous: priv }), {
    code: 'ERR_NOTIFY_URL_REFUSED',
    refusal: 'private-address',
  });
});

t.test('chat connector: a url or toAddresses, exactly one', async (t) => {
  const box = testBox();
  const byUrl = normaliseChannel({ kind: 'chat-connector', url: HOOK }, { secrets: box });
  t.ok(byUrl.url);
  t.equal(byUrl.toAddresses, undefined);
  const byMail = normaliseChannel(
    { kind: 'chat-connector', toAddresses: ['team@example.org'] },
    { secrets: box },
  );
  t.same(byMail.toAddresses, ['team@example.org']);
  t.equal(byMail.url, undefined);
  t.throws(
    () =>
      normaliseChannel(
        { kind: 'chat-connector', url: HOOK, toAddresses: ['a@example.org'] },
        { secrets: box },
      ),
    {
      code: 'ERR_NOTIFY_INVALID_CHANNEL',
    },
  );
  t.throws(() => normaliseChannel({ kind: 'chat-connector' }, { secrets: box }), {
    code: 'ERR_NOTIFY_INVALID_CHANNEL',
  });
  const switched = normaliseChannel({ toAddresses: ['b@example.org'] }, { secrets: box, previous: byUrl });
  t.equal(switched.url, undefined, 'switching to the mail path drops the url');
  t.same(switched.toAddresses, ['b@example.org']);
});

t.test(
  'invalid inputs fail with ERR_NOTIFY_INVALID_CHANNEL and the field, never quoting a value',
  async (t) => {
    const box = testBox();
    const cases: [unknown, string][] = [
      [null, ''],
      [{ kind: 'pager' }, 'kind'],
      [{ kind: 'email', toAddresses: [] }, 'toAddresses'],
      [{ kind: 'email', toAddresses: ['not-an-address'] }, 'toAddresses'],
      [
        { kind: 'email', toAddresses: Array.from({ length: 21 }, (_, i) => `u${i}@example.org`) },
        'toAddresses',
      ],
      [{ kind: 'email', toAddresses: ['a@example.org'], name: 'x\ny' }, 'name'],
      [{ kind: 'email', toAddresses: ['a@example.org'], enabled: 'yes' }, 'enabled'],
      [{ kind: 'email', toAddresses: ['a@example.org'], id: 'bad id!' }, 'id'],
      [{ kind: 'webhook' }, 'url'],
      [{ kind: 'webhook', url: HOOK, signingSecret: 'short' }, 'signingSecret'],
      [{ kind: 'incident' }, 'routingKey'],
      [{ kind: 'incident', routingKey: 'has space SECRET' }, 'routingKey'],
      [{ kind: 'alert-api', url: HOOK }, 'apiKey'],
      [{ kind: 'alert-api', url: HOOK, apiKey: `${KEY}\r\nX-Injected: 1` }, 'apiKey'],
      [{ kind: 'itsm-event', url: HOOK, apiKey: KEY }, 'username'],
      [{ kind: 'itsm-event', url: HOOK, apiKey: KEY, username: 'a:b' }, 'username'],
    ];
    for (const [input, field] of cases) {
      try {
        normaliseChannel(input, { secrets: box });
        t.fail(`refused ${JSON.stringify(input)?.slice(0, 60)}`);
      } catch (e) {
        t.ok(isNotifyError(e, 'ERR_NOTIFY_INVALID_CHANNEL'), `code for ${field}`);
        t.equal((e as { field?: string }).field, field);
        t.notMatch((e as Error).message, /SECRET|GENIEKEY|not-an-address/);
      }
    }
    t.throws(() => normaliseChannel({ kind: 'webhook', url: 'http://example.com/' }, { secrets: box }), {
      code: 'ERR_NOTIFY_URL_REFUSED',
      refusal: 'scheme',
    });
  },
);

t.test('email addresses are trimmed, domain lower-cased and deduplicated', async (t) => {
  const c = normaliseChannel(
    { kind: 'email', toAddresses: [' Ops@Example.ORG ', 'ops@example.org', 'dev+alerts@example.org'] },
    { secrets: testBox() },
  );
  t.same(c.toAddresses, ['Ops@example.org', 'dev+alerts@example.org']);
});
