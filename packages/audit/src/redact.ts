/**
 * The redaction guard: audit events never carry a secret, token, URL credential or backup data.
 *
 * The primary rule is the engine's: it puts only small, named, safe fields into an event's
 * `detail` (ids, names, counts, booleans, digests; presence flags instead of values). This module
 * is the second line of defence, a scanner that recognises values that look like secrets:
 *
 * | Rule | Recognises | Kind |
 * |---|---|---|
 * | `armoured-key` | `-----BEGIN ...-----` armour (PEM, Coffer key files), `AGE-SECRET-KEY-1`, minisign `untrusted comment:` | strong |
 * | `pull-credential` | `dps_...` secrets and `dpc_...` client ids (and so `dpc_x.dps_y` presentations) | strong |
 * | `bearer-token` | `Bearer <token>` / `Basic <base64>` Authorization values | strong |
 * | `jwt` | a compact JWS / JWT (`eyJ...`.`...`.) | strong |
 * | `known-token-prefix` | well-known vendor token prefixes (`ghp_`, `github_pat_`, `xoxb-`, `sk_live_`, `glpat-`, `AKIA...`) | strong |
 * | `url-credentials` | a URL with a userinfo part (`scheme://user:pass@host`, `scheme://token@host`) | strong |
 * | `too-long` | a string over 512 characters (backup data has no business in an event) | strong |
 * | `url` | a URL with anything after the origin (path, query, fragment): webhook and presigned URLs carry their secret there; record an origin instead | heuristic |
 * | `hex-blob` | 64 or more hex digits in a row that are not a `sha256:`/`sha384:`/`sha512:` digest | heuristic |
 * | `base64-blob` | 40 or more base64/base64url characters in a row mixing upper case, lower case and digits, with high character entropy and frequent changes of character class (random, not CamelCase words) | heuristic |
 * | `sensitive-field` | a string, array or object under a field whose name ends in password, passphrase, secret, token, authorization, cookie, credential(s), dsn, connection string, or api/private/secret/access/signing/session key; booleans, numbers and null (presence flags) are allowed there | strong |
 *
 * `detail` and `target` are checked against every rule. Identity fields (actor and approver email
 * and subject, role, source address, and a `target` that is an `oidc:`/`saml:` subject) only
 * against the strong rules, because a stable subject is legitimately a long opaque identifier or
 * an issuer URL. `assertNoSecrets` refuses; the
 * sanitiser replaces each finding with the string `[redacted]` (and `buildEvent` uses the
 * sanitiser, so an engine bug loses a field, not the whole audit record). Findings name the JSON
 * path and the rule, never the value.
 */
import { AuditError } from './errors.ts';
import { isPlainObject } from './internal/shape.ts';

/** The placeholder the sanitiser writes in place of a value that looked like a secret. */
export const REDACTED = '[redacted]';

/** Longest string allowed anywhere in an event (`too-long` beyond it). */
export const MAX_STRING_LENGTH = 512;

/** The name of the rule a value tripped. */
export type SecretRule =
  | 'armoured-key'
  | 'pull-credential'
  | 'bearer-token'
  | 'jwt'
  | 'known-token-prefix'
  | 'url-credentials'
  | 'too-long'
  | 'url'
  | 'hex-blob'
  | 'base64-blob'
  | 'sensitive-field';

/** One value that looked like a secret: where (a JSON path of safe key names) and which rule. */
export interface SecretFinding {
  readonly path: string;
  readonly rule: SecretRule;
}

const ARMOUR = /-----BEGIN [A-Z0-9 ]+-----|AGE-SECRET-KEY-1|untrusted comment:/i;
// No word boundary before the prefix: `xdps_...` must not slip through.
const PULL_CREDENTIAL = /dp[sc]_[A-Za-z0-9_-]{4,}/;
const BEARER = /\b(?:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}/i;
const JWT = /eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\./;
const KNOWN_PREFIX =
  /(?:^|[^A-Za-z0-9])(?:ghp_|gho_|ghs_|ghu_|ghr_|github_pat_|xox[abposr]-|sk_live_|sk_test_|rk_live_|glpat-|npm_[A-Za-z0-9]{20})|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/;
const URL_RE = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s"'<>]*/g;
const DIGEST = /sha(?:256|384|512):[0-9a-f]+/g;
const HEX_RUN = /[0-9a-fA-F]{64,}/;
const B64_RUN = /[A-Za-z0-9+/_-]{40,}={0,2}/g;

const SENSITIVE_LAST_WORDS = new Set([
  'password',
  'passwords',
  'passphrase',
  'passwd',
  'pwd',
  'secret',
  'secrets',
  'token',
  'tokens',
  'authorization',
  'authorisation',
  'cookie',
  'cookies',
  'credential',
  'credentials',
  'dsn',
  'apikey',
  'privatekey',
  'secretkey',
]);
const SENSITIVE_KEY_QUALIFIERS = new Set(['api', 'private', 'secret', 'access', 'signing', 'session']);

/** Shannon entropy in bits per character. */
function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

function charClass(c: string): number {
  return c >= 'a' && c <= 'z' ? 0 : c >= 'A' && c <= 'Z' ? 1 : c >= '0' && c <= '9' ? 2 : 3;
}

/**
 * Share of adjacent character pairs that change class (lower, upper, digit, other). Random
 * base64 changes class about 64% of the time; CamelCase names and paths about 30%, which keeps
 * `MyJob2024ProductionBackup`-style identifiers from being mistaken for blobs.
 */
function classChanges(s: string): number {
  let changes = 0;
  for (let i = 1; i < s.length; i++) if (charClass(s[i - 1]!) !== charClass(s[i]!)) changes++;
  return changes / (s.length - 1);
}

function urlRule(text: string): SecretRule | null {
  let worst: SecretRule | null = null;
  for (const m of text.matchAll(URL_RE)) {
    const rest = m[0].slice(m[0].indexOf('://') + 3);
    const authorityEnd = rest.search(/[/?#]/);
    const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
    if (authority.includes('@')) return 'url-credentials';
    const after = authorityEnd < 0 ? '' : rest.slice(authorityEnd);
    if (after !== '' && after !== '/') worst = 'url';
  }
  return worst;
}

/**
 * The first rule `text` trips, or null. With `heuristics: false` only the strong rules run (for
 * identity fields). Pure; never throws.
 */
export function looksSecret(text: string, options: { heuristics?: boolean } = {}): SecretRule | null {
  if (text.length > MAX_STRING_LENGTH) return 'too-long';
  if (ARMOUR.test(text)) return 'armoured-key';
  if (PULL_CREDENTIAL.test(text)) return 'pull-credential';
  if (BEARER.test(text)) return 'bearer-token';
  if (JWT.test(text)) return 'jwt';
  if (KNOWN_PREFIX.test(text)) return 'known-token-prefix';
  const url = urlRule(text);
  if (url === 'url-credentials') return url;
  if (options.heuristics === false) return null;
  if (url) return url;
  const undigested = text.replace(DIGEST, ' ');
  if (HEX_RUN.test(undigested)) return 'hex-blob';
  for (const m of undigested.matchAll(B64_RUN)) {
    const run = m[0];
    if (
      /[A-Z]/.test(run) &&
      /[a-z]/.test(run) &&
      /[0-9]/.test(run) &&
      entropy(run) >= 4.2 &&
      classChanges(run) >= 0.45
    ) {
      return 'base64-blob';
    }
  }
  return null;
}

/** True when a field of this name must not hold a string, array or object. */
export function isSensitiveFieldName(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');
  const last = words.at(-1);
  if (last === undefined) return false;
  if (SENSITIVE_LAST_WORDS.has(last)) return true;
  const before = words.at(-2);
  if (last === 'key' && before !== undefined && SENSITIVE_KEY_QUALIFIERS.has(before)) return true;
  if (last === 'string' && before === 'connection') return true;
  return false;
}

/** Keys short and plain enough to name in a path (engine detail keys are; data-derived keys may not be). */
const SAFE_KEY = /^[A-Za-z_][A-Za-z0-9_-]{0,23}$/;

/**
 * `path` extended by `key`, naming the key only when it is an identifier of at most 24 characters
 * that does not itself look like a secret (so a path in an error message never quotes one); any
 * other key shows as `[?]`. Internal helper.
 */
export function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return SAFE_KEY.test(key) && looksSecret(key) === null ? `${path}.${key}` : `${path}[?]`;
}

/**
 * Walks a JSON value and returns it with every finding replaced by {@link REDACTED} (a key that
 * looks secret is renamed `[redacted-key-N]`), plus the findings. `root` names the top of the
 * paths (default `detail`). Values that are not JSON (undefined, functions, class instances,
 * non-finite numbers) are left for the event validator to refuse.
 */
export function sanitizeDetail<T>(value: T, root = 'detail'): { value: T; findings: SecretFinding[] } {
  const findings: SecretFinding[] = [];
  const walk = (v: unknown, path: string, depth: number): unknown => {
    if (typeof v === 'string') {
      const rule = looksSecret(v);
      if (rule === null) return v;
      findings.push({ path, rule });
      return REDACTED;
    }
    if (depth > 16) return v;
    if (Array.isArray(v)) return v.map((item, i) => walk(item, childPath(path, i), depth + 1));
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {};
      let renamed = 0;
      for (const [key, child] of Object.entries(v)) {
        const p = childPath(path, key);
        let name = key;
        const keyRule = looksSecret(key);
        if (keyRule !== null) {
          findings.push({ path: p, rule: keyRule });
          name = `[redacted-key-${++renamed}]`;
        }
        if (isSensitiveFieldName(key) && child !== null && typeof child === 'object') {
          findings.push({ path: p, rule: 'sensitive-field' });
          out[name] = REDACTED;
        } else if (isSensitiveFieldName(key) && typeof child === 'string') {
          if (child !== REDACTED) findings.push({ path: p, rule: 'sensitive-field' });
          out[name] = REDACTED;
        } else {
          out[name] = walk(child, p, depth + 1);
        }
      }
      return out;
    }
    return v;
  };
  return { value: walk(value, root, 0) as T, findings };
}

/** Every finding in `value` (see {@link sanitizeDetail}); empty when it is clean. */
export function findSecrets(value: unknown, root = 'detail'): SecretFinding[] {
  return sanitizeDetail(value, root).findings;
}

/**
 * Refuses a value that looks like it carries a secret. Returns nothing when `value` is clean.
 * Throws `ERR_AUDIT_SECRET_DETECTED` naming the first finding's path and rule (never the value).
 */
export function assertNoSecrets(value: unknown, root = 'detail'): void {
  const first = findSecrets(value, root)[0];
  if (first !== undefined) {
    throw new AuditError(
      'ERR_AUDIT_SECRET_DETECTED',
      `${first.path} looks like it carries a secret (rule ${first.rule}); audit events never carry secrets`,
    );
  }
}
