// The URL guard's save-time vectors: every refused class, IPv6 forms, the other IPv4 spellings,
// credentials, http, preview domains; and the send-time resolution check.
import t from 'tap';
import { checkChannelUrl, classifyAddress, isNotifyError, resolveTarget } from '../src/index.ts';

function refusal(url: string, opts = {}): string | undefined {
  try {
    checkChannelUrl(url, opts);
    return undefined;
  } catch (e) {
    if (!isNotifyError(e, 'ERR_NOTIFY_URL_REFUSED')) throw e;
    return e.refusal;
  }
}

t.test('accepted: public https URLs', async (t) => {
  for (const u of [
    'https://hooks.slack.com/services/T000/B000/XXXX',
    'https://example.com:8443/hook?x=1',
    'https://93.184.216.34/hook',
    'https://[2606:2800:220:1:248:1893:25c8:1946]/hook',
    'https://outlook.webhook.office.com/webhookb2/abc',
  ])
    t.equal(refusal(u), undefined, u);
});

t.test('refused: scheme, credentials, malformed', async (t) => {
  t.equal(refusal('http://example.com/hook'), 'scheme');
  t.equal(refusal('ftp://example.com/hook'), 'scheme');
  t.equal(refusal('javascript:alert(1)'), 'scheme');
  t.equal(refusal('https://user:pass@example.com/hook'), 'credentials');
  t.equal(refusal('https://user@example.com/hook'), 'credentials');
  t.equal(refusal('https://:pw@example.com/'), 'credentials');
  t.equal(refusal('not a url'), 'malformed');
  t.equal(refusal(''), 'malformed');
  t.equal(refusal('https://exa mple.com/'), 'malformed');
  t.equal(refusal('https://example.com/\nx'), 'malformed');
  t.equal(refusal('https://example.com/' + 'a'.repeat(3000)), 'malformed');
  // credentials and scheme are refused even with the private opt-in
  t.equal(refusal('http://10.0.0.1/', { allowPrivateTarget: true }), 'scheme');
  t.equal(refusal('https://u:p@10.0.0.1/', { allowPrivateTarget: true }), 'credentials');
});

t.test('refused: platform-hosted preview domains, with or without the opt-in', async (t) => {
  for (const u of [
    'https://my-app-git-branch.vercel.app/hook',
    'https://vercel.app/',
    'https://deploy-preview-1--site.netlify.app/x',
    'https://x.pages.dev/',
    'https://x.workers.dev/',
    'https://abc.ngrok-free.app/',
    'https://abc.trycloudflare.com/',
    'https://webhook.site/uuid',
    'https://x.herokuapp.com./',
  ])
    t.equal(refusal(u, { allowPrivateTarget: true }), 'preview-domain', u);
  t.equal(refusal('https://notvercel.app/'), undefined, 'a look-alike domain is not a preview domain');
});

t.test(
  'refused by default, allowed with the opt-in: private, loopback, link-local, metadata ...',
  async (t) => {
    const cases: [string, string][] = [
      ['https://127.0.0.1/', 'private-address'],
      ['https://127.1.2.3/', 'private-address'],
      ['https://10.1.2.3/', 'private-address'],
      ['https://172.16.0.1/', 'private-address'],
      ['https://172.31.255.255/', 'private-address'],
      ['https://192.168.1.1/', 'private-address'],
      ['https://169.254.169.254/latest/meta-data/', 'private-address'],
      ['https://169.254.1.1/', 'private-address'],
      ['https://100.64.0.1/', 'private-address'],
      ['https://100.100.100.200/', 'private-address'],
      ['https://0.0.0.0/', 'private-address'],
      ['https://224.0.0.1/', 'private-address'],
      ['https://255.255.255.255/', 'private-address'],
      ['https://198.18.0.1/', 'private-address'],
      // other IPv4 spellings: WHATWG URL parsing turns them into 127.0.0.1 first
      ['https://2130706433/', 'private-address'],
      ['https://0x7f000001/', 'private-address'],
      ['https://0177.0.0.1/', 'private-address'],
      ['https://0x7f.1/', 'private-address'],
      ['https://127.1/', 'private-address'],
      ['https://017700000001/', 'private-address'],
      // IPv6 forms
      ['https://[::1]/', 'private-address'],
      ['https://[0:0:0:0:0:0:0:1]/', 'private-address'],
      ['https://[::]/', 'private-address'],
      ['https://[::ffff:127.0.0.1]/', 'private-address'],
      ['https://[::ffff:7f00:1]/', 'private-address'],
      ['https://[::ffff:8.8.8.8]/', 'private-address'],
      ['https://[fe80::1]/', 'private-address'],
      ['https://[fc00::1]/', 'private-address'],
      ['https://[fd12:3456::1]/', 'private-address'],
      ['https://[fd00:ec2::254]/', 'private-address'],
      ['https://[64:ff9b::a9fe:a9fe]/', 'private-address'],
      ['https://[2002:7f00:1::]/', 'private-address'],
      ['https://[ff02::1]/', 'private-address'],
      ['https://[2001:db8::1]/', 'private-address'],
      // names that only mean something on a private network
      ['https://localhost/', 'local-name'],
      ['https://localhost./', 'local-name'],
      ['https://api.localhost/', 'local-name'],
      ['https://printer.local/', 'local-name'],
      ['https://metadata.google.internal/', 'local-name'],
      ['https://router.home.arpa/', 'local-name'],
      ['https://intranet/', 'local-name'],
    ];
    for (const [u, why] of cases) {
      t.equal(refusal(u), why, u);
      t.equal(refusal(u, { allowPrivateTarget: true }), undefined, `${u} with the opt-in`);
    }
  },
);

t.test('classifyAddress names each class', async (t) => {
  t.equal(classifyAddress('8.8.8.8'), undefined);
  t.equal(classifyAddress('2606:4700:4700::1111'), undefined);
  t.equal(classifyAddress('[2606:4700:4700::1111]'), undefined);
  t.equal(classifyAddress('64:ff9b::808:808'), undefined, 'NAT64 of a public address');
  t.equal(classifyAddress('127.0.0.1'), 'loopback');
  t.equal(classifyAddress('::1'), 'loopback');
  t.equal(classifyAddress('10.0.0.1'), 'private');
  t.equal(classifyAddress('100.64.1.1'), 'cgnat');
  t.equal(classifyAddress('169.254.169.254'), 'metadata');
  t.equal(classifyAddress('fd00:ec2::254'), 'metadata');
  t.equal(classifyAddress('169.254.0.1'), 'link-local');
  t.equal(classifyAddress('fe80::1%eth0'), 'link-local');
  t.equal(classifyAddress('fd00::1'), 'unique-local');
  t.equal(classifyAddress('::ffff:8.8.8.8'), 'ipv4-mapped');
  t.equal(classifyAddress('::8.8.8.8'), 'ipv4-compatible');
  t.equal(classifyAddress('64:ff9b::7f00:1'), 'loopback');
  t.equal(classifyAddress('2002:a00:1::'), 'private', '6to4 of 10.0.0.1');
  t.equal(classifyAddress('ff02::1'), 'multicast');
  t.equal(classifyAddress('192.0.2.1'), 'documentation');
  t.equal(classifyAddress('not-an-ip'), 'reserved');
});

t.test('send-time: one resolution, every answer checked, the checked address returned', async (t) => {
  const calls: string[] = [];
  const resolver = async (h: string) => {
    calls.push(h);
    if (h === 'public.example.com') return [{ address: '93.184.216.34', family: 4 as const }];
    if (h === 'mixed.example.com')
      return [
        { address: '93.184.216.34', family: 4 as const },
        { address: '10.0.0.5', family: 4 as const },
      ];
    if (h === 'rebind.example.com') return [{ address: '127.0.0.1', family: 4 as const }];
    if (h === 'empty.example.com') return [];
    throw new Error('SERVFAIL');
  };
  const ok = await resolveTarget('https://public.example.com/hook', { resolver });
  t.equal(ok.address, '93.184.216.34');
  t.equal(ok.url.hostname, 'public.example.com');
  const why = async (u: string, o = {}) =>
    resolveTarget(u, { resolver, ...o }).then(
      () => 'ok',
      (e) => `${e.code}:${e.refusal ?? ''}`,
    );
  t.equal(await why('https://rebind.example.com/'), 'ERR_NOTIFY_URL_REFUSED:private-address');
  t.equal(
    await why('https://mixed.example.com/'),
    'ERR_NOTIFY_URL_REFUSED:private-address',
    'one private answer refuses',
  );
  t.equal(await why('https://empty.example.com/'), 'ERR_NOTIFY_URL_REFUSED:no-address');
  t.equal(await why('https://broken.example.com/'), 'ERR_NOTIFY_DNS:');
  t.equal(await why('https://rebind.example.com/', { allowPrivateTarget: true }), 'ok');
  t.equal(await why('https://[::1]/'), 'ERR_NOTIFY_URL_REFUSED:private-address');
  t.same(
    calls.filter((c) => c === 'public.example.com'),
    ['public.example.com'],
    'resolved exactly once',
  );
  const literal = await resolveTarget('https://[::1]:8443/', { resolver, allowPrivateTarget: true });
  t.equal(literal.address, '::1', 'an IP literal is not resolved');
  t.equal(literal.family, 6);
});

t.test('refusal messages never quote the URL', async (t) => {
  for (const u of [
    'https://user:hunter2@example.com/SECRETPATH',
    'http://example.com/SECRETPATH',
    'https://10.0.0.1/SECRETPATH',
  ]) {
    try {
      checkChannelUrl(u);
      t.fail('refused');
    } catch (e) {
      t.notMatch(String((e as Error).message), /SECRETPATH|hunter2|example\.com|10\.0\.0\.1/);
    }
  }
});
