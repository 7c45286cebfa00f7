/**
 * Notification channels (specification "Notification channel, rule and delivery record"): seven
 * kinds, each storing only its own transport fields (foreign fields are dropped on save). Secret
 * fields are sealed through the engine's `SecretBox` before they are stored and are write-only:
 * `viewChannel` shows them as `{ set: true }`, an update that leaves them out keeps the stored
 * value. A channel URL is sealed too (a chat webhook's path is its credential); its origin is kept
 * in the clear for the read shape.
 */
import { randomBytes } from 'node:crypto';
import { NotifyError } from './errors.ts';
import { checkChannelUrl } from './url-guard.ts';

export const CHANNEL_KINDS = [
  'email',
  'webhook',
  'chat-webhook',
  'chat-connector',
  'incident',
  'alert-api',
  'itsm-event',
] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** Seals and opens secret strings; the engine provides it (its sealing key never enters this package). */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
}

/** A channel as stored: secret fields are sealed strings (`SecretBox.seal` output). */
export interface StoredChannel {
  id: string;
  name: string;
  kind: ChannelKind;
  enabled: boolean;
  /** Opt-in: the URL may name or resolve to a private, loopback or link-local address. */
  allowPrivateTarget: boolean;
  /** email, chat-connector (mail path). */
  toAddresses?: string[];
  /** Sealed URL: webhook, chat-webhook, chat-connector (webhook path), alert-api, itsm-event. */
  url?: string;
  /** The URL's origin (`https://host[:port]`), kept in the clear for the read shape. */
  urlOrigin?: string;
  /** itsm-event: the HTTP Basic user name. */
  username?: string;
  /** Sealed: incident. */
  routingKey?: string;
  /** Sealed: alert-api, itsm-event. */
  apiKey?: string;
  /** Sealed, optional: webhook (HMAC-SHA256 signing). */
  signingSecret?: string;
}

/** A channel with its secrets opened, only ever in memory while a message is sent. */
export interface OpenChannel {
  kind: ChannelKind;
  toAddresses?: string[];
  url?: string;
  username?: string;
  routingKey?: string;
  apiKey?: string;
  signingSecret?: string;
}

/** The read shape (`GET /admin/notify/channels`): no secret, no URL path. */
export interface ChannelView {
  id: string;
  name: string;
  kind: ChannelKind;
  enabled: boolean;
  allowPrivateTarget: boolean;
  toAddresses?: string[];
  url?: { set: true; origin: string };
  username?: string;
  routingKey?: { set: true };
  apiKey?: { set: true };
  signingSecret?: { set: true };
}

/** What an audit row may say about a channel: never a URL, key or credential. */
export interface ChannelSummary {
  id: string;
  name: string;
  kind: ChannelKind;
  enabled: boolean;
}

type Field = 'toAddresses' | 'url' | 'username' | 'routingKey' | 'apiKey' | 'signingSecret';

/** The transport fields each kind keeps; everything else in an input is dropped. */
export const KIND_FIELDS: Record<ChannelKind, readonly Field[]> = {
  email: ['toAddresses'],
  webhook: ['url', 'signingSecret'],
  'chat-webhook': ['url'],
  'chat-connector': ['url', 'toAddresses'],
  incident: ['routingKey'],
  'alert-api': ['url', 'apiKey'],
  'itsm-event': ['url', 'username', 'apiKey'],
};

const SECRET_FIELDS = ['routingKey', 'apiKey', 'signingSecret'] as const;
const MAX_ADDRESSES = 20;
const EMAIL =
  /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

function bad(field: string, message: string): never {
  throw new NotifyError('ERR_NOTIFY_INVALID_CHANNEL', message, { field });
}

function isKind(x: unknown): x is ChannelKind {
  return typeof x === 'string' && (CHANNEL_KINDS as readonly string[]).includes(x);
}

/** Validates a list of mail addresses; returns them trimmed, domains lower-cased, deduplicated. */
export function normaliseAddresses(raw: unknown, field = 'toAddresses'): string[] {
  if (!Array.isArray(raw) || raw.length === 0) bad(field, `${field} must be a non-empty list`);
  if (raw.length > MAX_ADDRESSES) bad(field, `${field} holds at most ${MAX_ADDRESSES} addresses`);
  const out: string[] = [];
  for (const a of raw) {
    if (typeof a !== 'string') bad(field, `${field} holds strings only`);
    const t = a.trim();
    if (t.length > 254 || !EMAIL.test(t)) bad(field, `${field} holds an invalid address`);
    const at = t.lastIndexOf('@');
    const norm = t.slice(0, at) + t.slice(at).toLowerCase();
    if (!out.some((o) => o.toLowerCase() === norm.toLowerCase())) out.push(norm);
  }
  return out;
}

function secretValue(field: string, raw: unknown, min: number, max: number, pattern?: RegExp): string {
  if (typeof raw !== 'string' || raw.length < min || raw.length > max || CONTROL.test(raw))
    bad(field, `${field} must be ${min} to ${max} characters without control characters`);
  if (pattern && !pattern.test(raw)) bad(field, `${field} has characters it may not have`);
  return raw;
}

const SECRET_RULES: Record<(typeof SECRET_FIELDS)[number], (raw: unknown) => string> = {
  routingKey: (raw) => secretValue('routingKey', raw, 1, 128, /^[A-Za-z0-9_-]+$/),
  apiKey: (raw) => secretValue('apiKey', raw, 1, 4096, /^\S+$/),
  signingSecret: (raw) => secretValue('signingSecret', raw, 16, 1024),
};

export interface NormaliseChannelOptions {
  secrets: SecretBox;
  /** The stored channel this input updates: its kind is kept, omitted secrets and URL are kept. */
  previous?: StoredChannel;
  /** Makes the id of a new channel; default `ch_` plus 12 random bytes in base64url. */
  newId?: () => string;
}

/**
 * Validates a channel input (create, or update with `previous`) and returns the channel to store:
 * only its kind's transport fields, URLs checked with `checkChannelUrl` and sealed, secrets sealed.
 * Throws `ERR_NOTIFY_INVALID_CHANNEL` (with `field`) or `ERR_NOTIFY_URL_REFUSED`. Neither message
 * quotes a value.
 */
export function normaliseChannel(input: unknown, options: NormaliseChannelOptions): StoredChannel {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) bad('', 'a channel is an object');
  const i = input as Record<string, unknown>;
  const prev = options.previous;
  const kind = i.kind ?? prev?.kind;
  if (!isKind(kind)) bad('kind', `kind must be one of ${CHANNEL_KINDS.join(', ')}`);
  if (prev && kind !== prev.kind) bad('kind', 'the kind of a channel cannot change');

  const id = prev?.id ?? (i.id === undefined ? (options.newId ?? newChannelId)() : i.id);
  if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(id))
    bad('id', 'id must be 1 to 64 of A-Z a-z 0-9 _ -');
  const nameRaw = i.name ?? prev?.name ?? kind;
  if (
    typeof nameRaw !== 'string' ||
    CONTROL.test(nameRaw) ||
    nameRaw.trim().length === 0 ||
    nameRaw.length > 100
  )
    bad('name', 'name must be 1 to 100 characters without control characters');
  const enabled = i.enabled ?? prev?.enabled ?? true;
  if (typeof enabled !== 'boolean') bad('enabled', 'enabled must be a boolean');
  const allowPrivateTarget = i.allowPrivateTarget ?? prev?.allowPrivateTarget ?? false;
  if (typeof allowPrivateTarget !== 'boolean')
    bad('allowPrivateTarget', 'allowPrivateTarget must be a boolean');

  const out: StoredChannel = { id, name: nameRaw.trim(), kind, enabled, allowPrivateTarget };
  const fields = KIND_FIELDS[kind];
  const has = (f: Field) => fields.includes(f) && i[f] !== undefined && i[f] !== null;

  // The URL path (and, for chat-connector, the choice between URL and addresses).
  let useUrl = fields.includes('url');
  if (kind === 'chat-connector') {
    if (has('url') && has('toAddresses')) bad('url', 'a chat connector has a url or toAddresses, not both');
    useUrl = has('url') || (!has('toAddresses') && prev?.url !== undefined);
    if (!useUrl && !has('toAddresses') && prev?.toAddresses === undefined)
      bad('url', 'a chat connector needs a url or toAddresses');
  }
  if (useUrl) {
    const plain = has('url') ? i.url : prev?.url !== undefined ? options.secrets.open(prev.url) : undefined;
    if (plain === undefined) bad('url', 'url is required');
    const url = checkChannelUrl(plain, { allowPrivateTarget });
    out.url = has('url') ? options.secrets.seal(url.href) : prev!.url;
    out.urlOrigin = url.origin;
  }
  if (fields.includes('toAddresses') && !useUrl) {
    out.toAddresses = normaliseAddresses(has('toAddresses') ? i.toAddresses : prev?.toAddresses);
  }
  if (fields.includes('username')) {
    const u = i.username ?? prev?.username;
    if (typeof u !== 'string' || u.length === 0 || u.length > 128 || CONTROL.test(u) || u.includes(':'))
      bad('username', 'username must be 1 to 128 characters, no colon or control characters');
    out.username = u;
  }
  for (const f of SECRET_FIELDS) {
    if (!fields.includes(f)) continue;
    const optional = f === 'signingSecret';
    if (i[f] === null && optional) continue; // an explicit null clears an optional secret
    if (has(f)) out[f] = options.secrets.seal(SECRET_RULES[f](i[f]));
    else if (prev?.[f] !== undefined) out[f] = prev[f];
    else if (!optional) bad(f, `${f} is required`);
  }
  return out;
}

function newChannelId(): string {
  return `ch_${randomBytes(12).toString('base64url')}`;
}

/** The redacted read shape: secrets as `{ set: true }`, the URL as its origin only. */
export function viewChannel(channel: StoredChannel): ChannelView {
  const v: ChannelView = {
    id: channel.id,
    name: channel.name,
    kind: channel.kind,
    enabled: channel.enabled,
    allowPrivateTarget: channel.allowPrivateTarget,
  };
  if (channel.toAddresses) v.toAddresses = [...channel.toAddresses];
  if (channel.url !== undefined) v.url = { set: true, origin: channel.urlOrigin ?? '' };
  if (channel.username !== undefined) v.username = channel.username;
  for (const f of SECRET_FIELDS) if (channel[f] !== undefined) v[f] = { set: true };
  return v;
}

/** What an audit row may carry about a channel (no URL, key, address or credential). */
export function channelSummary(channel: StoredChannel): ChannelSummary {
  return { id: channel.id, name: channel.name, kind: channel.kind, enabled: channel.enabled };
}

/** Opens a stored channel's secrets for one send. Throws whatever `SecretBox.open` throws. */
export function openChannel(channel: StoredChannel, secrets: SecretBox): OpenChannel {
  const o: OpenChannel = { kind: channel.kind };
  if (channel.toAddresses) o.toAddresses = channel.toAddresses;
  if (channel.url !== undefined) o.url = secrets.open(channel.url);
  if (channel.username !== undefined) o.username = channel.username;
  for (const f of SECRET_FIELDS) if (channel[f] !== undefined) o[f] = secrets.open(channel[f]!);
  return o;
}
