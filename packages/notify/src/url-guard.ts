/**
 * The outbound URL guard (specification "Notification channel, rule and delivery record": URL
 * validation on save and again at send). A channel URL must be https, carry no credentials in its
 * authority, not sit on a platform-hosted preview or request-bin domain, and by default not name or
 * resolve to a private, loopback, link-local, CGNAT, metadata, unique-local, IPv4-mapped or other
 * non-public address. At send time the host is resolved once, every answer is checked, and the
 * request connects to exactly the checked address (see `internal/http.ts`): no second lookup, so
 * DNS rebinding cannot swap the address between check and connect. A per-channel opt-in
 * (`allowPrivateTarget`) lifts the address and local-name checks, never the others.
 *
 * WHATWG URL parsing normalises the other IPv4 spellings first (`2130706433`, `0x7f.1`,
 * `0177.0.0.1` all become `127.0.0.1`), so they are checked as the address they denote.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { NotifyError } from './errors.ts';

/**
 * Domains where anyone can host a receiver under a throwaway name (preview deployments, tunnels,
 * request bins). A channel URL on one of them, or under one of them, is refused: such a host is
 * either a leftover preview or a place to collect what the engine sends.
 */
export const PREVIEW_DOMAINS: readonly string[] = [
  'vercel.app',
  'now.sh',
  'netlify.app',
  'pages.dev',
  'workers.dev',
  'herokuapp.com',
  'onrender.com',
  'fly.dev',
  'railway.app',
  'deno.dev',
  'glitch.me',
  'repl.co',
  'replit.dev',
  'surge.sh',
  'ngrok.io',
  'ngrok.app',
  'ngrok-free.app',
  'ngrok-free.dev',
  'trycloudflare.com',
  'loca.lt',
  'localtunnel.me',
  'serveo.net',
  'webhook.site',
  'requestbin.net',
  'pipedream.net',
];

/** Suffixes (and bare names) that only mean something on a private network. */
const LOCAL_SUFFIXES = [
  'localhost',
  'local',
  'internal',
  'intranet',
  'lan',
  'home.arpa',
  'corp',
  'localdomain',
];

/** Why an address is not a public unicast address; `undefined` for a public one. */
export type AddressClass =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'cgnat'
  | 'link-local'
  | 'metadata'
  | 'unique-local'
  | 'ipv4-mapped'
  | 'ipv4-compatible'
  | 'multicast'
  | 'documentation'
  | 'reserved';

type V4Range = [number, number, AddressClass];
const V4: V4Range[] = [
  // Most specific first: the metadata addresses inside link-local and CGNAT.
  [v4('169.254.169.254'), 32, 'metadata'],
  [v4('100.100.100.200'), 32, 'metadata'],
  [v4('0.0.0.0'), 8, 'unspecified'],
  [v4('10.0.0.0'), 8, 'private'],
  [v4('100.64.0.0'), 10, 'cgnat'],
  [v4('127.0.0.0'), 8, 'loopback'],
  [v4('169.254.0.0'), 16, 'link-local'],
  [v4('172.16.0.0'), 12, 'private'],
  [v4('192.0.0.0'), 24, 'reserved'],
  [v4('192.0.2.0'), 24, 'documentation'],
  [v4('192.88.99.0'), 24, 'reserved'],
  [v4('192.168.0.0'), 16, 'private'],
  [v4('198.18.0.0'), 15, 'reserved'],
  [v4('198.51.100.0'), 24, 'documentation'],
  [v4('203.0.113.0'), 24, 'documentation'],
  [v4('224.0.0.0'), 4, 'multicast'],
  [v4('240.0.0.0'), 4, 'reserved'],
];

type V6Range = [bigint, number, AddressClass | 'embedded-v4-96' | 'embedded-v4-6to4'];
const V6: V6Range[] = [
  [v6('::'), 128, 'unspecified'],
  [v6('::1'), 128, 'loopback'],
  [v6('::ffff:0:0'), 96, 'ipv4-mapped'],
  [v6('::'), 96, 'ipv4-compatible'],
  [v6('64:ff9b::'), 96, 'embedded-v4-96'],
  [v6('64:ff9b:1::'), 48, 'private'],
  [v6('100::'), 64, 'reserved'],
  [v6('2001::'), 32, 'reserved'],
  [v6('2001:db8::'), 32, 'documentation'],
  [v6('2002::'), 16, 'embedded-v4-6to4'],
  [v6('fd00:ec2::254'), 128, 'metadata'],
  [v6('fc00::'), 7, 'unique-local'],
  [v6('fe80::'), 10, 'link-local'],
  [v6('fec0::'), 10, 'private'],
  [v6('ff00::'), 8, 'multicast'],
];

function v4(s: string): number {
  const p = s.split('.').map(Number);
  return ((p[0]! << 24) | (p[1]! << 16) | (p[2]! << 8) | p[3]!) >>> 0;
}

function v6(s: string): bigint {
  let text = s;
  // An embedded dotted IPv4 tail becomes two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g || '0', 16)), 0n);
}

function classifyV4(n: number): AddressClass | undefined {
  for (const [base, bits, cls] of V4) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((n & mask) >>> 0 === base) return cls;
  }
  return undefined;
}

/**
 * Classifies an IP address (v4 dotted, or v6 in any textual form, with or without brackets or a
 * zone). Returns `undefined` for a public unicast address, otherwise why it is not one. Anything
 * that is not an IP address is `reserved` (refused).
 */
export function classifyAddress(address: string): AddressClass | undefined {
  let a = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const zone = a.indexOf('%');
  if (zone >= 0) a = a.slice(0, zone);
  const kind = isIP(a);
  if (kind === 4) return classifyV4(v4(a));
  if (kind !== 6) return 'reserved';
  const n = v6(a.toLowerCase());
  for (const [base, bits, cls] of V6) {
    const shift = BigInt(128 - bits);
    if (n >> shift !== base >> shift) continue;
    if (cls === 'embedded-v4-96') return classifyV4(Number(n & 0xffffffffn));
    if (cls === 'embedded-v4-6to4') return classifyV4(Number((n >> 80n) & 0xffffffffn));
    return cls;
  }
  return undefined;
}

export interface UrlCheckOptions {
  /** The channel's opt-in: a private, loopback or local target is allowed. */
  allowPrivateTarget?: boolean;
}

function refuse(refusal: ConstructorParameters<typeof NotifyError>[2] & object, message: string): never {
  throw new NotifyError('ERR_NOTIFY_URL_REFUSED', `channel url refused: ${message}`, refusal);
}

/** The host without brackets or a trailing dot, lower-cased. */
function bareHost(url: URL): string {
  let h = url.hostname.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  while (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/**
 * The save-time check (and the first half of the send-time one). Returns the parsed URL; throws
 * `ERR_NOTIFY_URL_REFUSED` with a `refusal` of `malformed`, `scheme`, `credentials`,
 * `preview-domain`, `local-name` or `private-address`. The message never quotes the URL.
 */
export function checkChannelUrl(raw: unknown, options: UrlCheckOptions = {}): URL {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 2048 || /[\s\u0000-\u001f]/.test(raw))
    refuse({ refusal: 'malformed', field: 'url' }, 'not a URL');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    refuse({ refusal: 'malformed', field: 'url' }, 'not a URL');
  }
  if (url.protocol !== 'https:') refuse({ refusal: 'scheme', field: 'url' }, 'only https is allowed');
  if (url.username !== '' || url.password !== '')
    refuse({ refusal: 'credentials', field: 'url' }, 'credentials in the authority are not allowed');
  const host = bareHost(url);
  if (host === '') refuse({ refusal: 'malformed', field: 'url' }, 'no host');
  if (isIP(host) === 0 && PREVIEW_DOMAINS.some((d) => host === d || host.endsWith(`.${d}`)))
    refuse({ refusal: 'preview-domain', field: 'url' }, 'platform-hosted preview domain');
  if (options.allowPrivateTarget) return url;
  if (isIP(host) !== 0) {
    if (classifyAddress(host) !== undefined)
      refuse({ refusal: 'private-address', field: 'url' }, 'not a public address');
    return url;
  }
  if (!host.includes('.') || LOCAL_SUFFIXES.some((s) => host === s || host.endsWith(`.${s}`)))
    refuse({ refusal: 'local-name', field: 'url' }, 'a name that only resolves on a private network');
  return url;
}

/** One DNS answer. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves a host name to its addresses (all of them). The default is the system resolver
 * (`dns.lookup` with `all: true`); tests and deployments with their own DNS inject one.
 */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/**
 * The send-time check: `checkChannelUrl` again, then one resolution of the host, every answer
 * checked (one non-public answer refuses the whole name unless `allowPrivateTarget`). Returns the
 * URL and the address to connect to. Throws `ERR_NOTIFY_URL_REFUSED` (`no-address` when the name
 * has no answer) or `ERR_NOTIFY_DNS` when the resolver failed.
 */
export async function resolveTarget(
  raw: string,
  options: UrlCheckOptions & { resolver?: Resolver } = {},
): Promise<{ url: URL; address: string; family: 4 | 6 }> {
  const url = checkChannelUrl(raw, options);
  const host = bareHost(url);
  const literal = isIP(host);
  if (literal !== 0) return { url, address: host, family: literal === 6 ? 6 : 4 };
  let answers: ResolvedAddress[];
  try {
    answers = await (options.resolver ?? systemResolver)(host);
  } catch {
    throw new NotifyError('ERR_NOTIFY_DNS', 'the channel host could not be resolved');
  }
  if (answers.length === 0) refuse({ refusal: 'no-address' }, 'the host has no address');
  if (!options.allowPrivateTarget && answers.some((a) => classifyAddress(a.address) !== undefined))
    refuse({ refusal: 'private-address' }, 'the host resolves to a non-public address');
  const first = answers[0]!;
  if (isIP(first.address) === 0)
    refuse({ refusal: 'no-address' }, 'the resolver answered something not an IP');
  return { url, address: first.address, family: isIP(first.address) === 6 ? 6 : 4 };
}
