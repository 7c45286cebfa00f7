/**
 * The plaintext-secret scanner of control-plane exports (docs/control-plane.md "Secret scan"):
 * an export is refused, when it is built and whenever one arrives, if any value in it looks like
 * a secret in the clear. Findings name the JSON path (`slices.configuration.notify.channels[0].apiKey`)
 * and a rule, never the value.
 *
 * Rules, checked on every string (object keys and array items included):
 * 1. `sealed-field`: a field whose name says secret (token, secret, password, apiKey, routingKey,
 *    privateKey, credential, a notify channel's `url`) holds a string that is not sealed text
 *    (`cnb1.` + base64url, the operational secret box). `...Env` fields name an environment
 *    variable and must look like one (`[A-Za-z_][A-Za-z0-9_]*`).
 * 2. `token-prefix`: a known credential shape anywhere (`dps_` pull-credential secrets, Slack
 *    `xox?-`, GitHub `ghp_`/`github_pat_`, AWS `AKIA`, Stripe `sk_live_`).
 * 3. `armoured-secret-key`: an armoured secret or private key (`-----BEGIN ... SECRET KEY-----`,
 *    `PRIVATE KEY-----`).
 * 4. `url-credentials`: a URL with a password in its user-info part.
 * 5. `known-secret`: one of the engine's own secret values (admin token, SCIM token, SMTP
 *    password) appears inside any string (values shorter than 8 characters are not compared).
 */

export interface SecretFinding {
  /** JSON path of the offending value. */
  path: string;
  rule: 'sealed-field' | 'token-prefix' | 'armoured-secret-key' | 'url-credentials' | 'known-secret';
}

const SECRET_NAME =
  /(secret|password|passwd|token|apikey|api_key|routingkey|privatekey|private_key|credential)/i;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const SEALED = /^cnb1\.[A-Za-z0-9_-]{16,}$/;
const TOKEN_PREFIXES = [
  /\bdps_[A-Za-z0-9_-]{8,}/,
  /\bxox[abprs]-[A-Za-z0-9-]{8,}/,
  /\bghp_[A-Za-z0-9]{20,}/,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/,
  /\bAKIA[0-9A-Z]{16}\b/,
  /\bsk_live_[A-Za-z0-9]{16,}/,
];
const ARMOURED = /-----BEGIN [A-Z0-9 ]*(SECRET|PRIVATE) KEY-----/;
const URL_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^/\s:@]*:[^/\s@]+@/i;
const MIN_KNOWN = 8;

function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

function checkString(value: string, knownSecrets: readonly string[]): SecretFinding['rule'] | null {
  if (ARMOURED.test(value)) return 'armoured-secret-key';
  if (TOKEN_PREFIXES.some((p) => p.test(value))) return 'token-prefix';
  if (URL_PASSWORD.test(value)) return 'url-credentials';
  for (const s of knownSecrets) if (s.length >= MIN_KNOWN && value.includes(s)) return 'known-secret';
  return null;
}

function fieldRule(key: string, value: string, inChannel: boolean): SecretFinding['rule'] | null {
  if (/Env$/.test(key)) return ENV_NAME.test(value) ? null : 'sealed-field';
  const secretNamed = SECRET_NAME.test(key) || (inChannel && key === 'url');
  if (!secretNamed) return null;
  return SEALED.test(value) ? null : 'sealed-field';
}

/**
 * Walks `value` and returns the first plaintext secret found (depth first, keys in order), or
 * null. `knownSecrets` are the engine's own secret values (compared, never returned).
 */
export function findPlaintextSecret(
  value: unknown,
  knownSecrets: readonly string[] = [],
  root = '$',
): SecretFinding | null {
  const known = knownSecrets.filter((s) => typeof s === 'string' && s.length >= MIN_KNOWN);
  const walk = (v: unknown, path: string): SecretFinding | null => {
    if (typeof v === 'string') {
      const rule = checkString(v, known);
      return rule ? { path, rule } : null;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const f = walk(v[i], pathOf(path, i));
        if (f) return f;
      }
      return null;
    }
    if (typeof v === 'object' && v !== null) {
      // A notification channel (its `url` is a credential, sealed like its secrets).
      const channel = /\.channels\[\d+\]$/.test(path);
      for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
        const at = pathOf(path, k);
        const keyRule = checkString(k, known);
        if (keyRule) return { path: at, rule: keyRule };
        if (typeof child === 'string') {
          const rule = fieldRule(k, child, channel);
          if (rule) return { path: at, rule };
        }
        const f = walk(child, at);
        if (f) return f;
      }
    }
    return null;
  };
  return walk(value, root);
}
