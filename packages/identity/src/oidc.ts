/**
 * OpenID Connect sign-in: the relying-party side, on `openid-client` (v6).
 *
 * The engine keeps connections (issuer, client id, the sealed client secret, allowed email
 * domains, scopes, the group claim and its group-to-role mapping) and wires three routes; this
 * module does the protocol: discovery with a timeout, the authorization request (authorization
 * code flow with `state`, `nonce` and PKCE S256), the transaction the browser carries between the
 * two (HMAC-signed, ten minutes), and the callback: the state compared in constant time, the
 * RFC 9207 `iss` parameter, the code exchanged with the PKCE verifier, the ID token checked
 * (signature, issuer, audience, nonce, expiry), a verified email in an allowed domain, and the
 * subject `oidc:<connection id>:<issuer>#<sub>` (rule 7: never the email).
 *
 * Every refusal is an IdentityError, ERR_IDENTITY_OIDC_REFUSED (or ERR_IDENTITY_OIDC_UNAVAILABLE
 * when the provider cannot be reached or describes itself wrongly) with `refusal` set to a stable
 * reason code. Messages never carry a token, a code, a state, a nonce, a verifier or a secret.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import * as oidc from 'openid-client';
import { IdentityError, type OidcRefusal } from './errors.ts';
import { normaliseEmail } from './people.ts';

/** How long a transaction (start to callback) lives unless the caller sets it: 10 minutes. */
export const OIDC_TRANSACTION_TTL_MS = 10 * 60 * 1000;
/** Discovery and every later request to the provider give up after this unless set: 10 seconds. */
export const OIDC_DEFAULT_TIMEOUT_MS = 10_000;
/** Scopes asked for unless the connection names its own (`openid` is always included). */
export const OIDC_DEFAULT_SCOPES: readonly string[] = ['openid', 'email', 'profile'];
/**
 * The transaction cookie. `SameSite=Lax`, not Strict: the callback is a top-level navigation
 * from the provider's site, on which a Strict cookie is not sent.
 */
export const OIDC_TRANSACTION_COOKIE = '__Host-engine_oidc';

/** One identity-provider connection, as the engine holds it in memory. */
export interface OidcConnection {
  /** The connection id: 1 to 64 of `a-z`, `0-9` and `-`, starting with a letter or digit. */
  id: string;
  /** The issuer identifier: `https://` (http only on a loopback host), no query or fragment. */
  issuer: string;
  clientId: string;
  /** Plaintext only in memory (the engine keeps it sealed); absent for a public client. */
  clientSecret?: string;
  /**
   * Email domains allowed to sign in (exact, case-insensitive; `example.org` does not admit
   * `sub.example.org`). At least one: a connection never admits every account of a provider.
   */
  allowedEmailDomains: readonly string[];
  /** Scopes to ask for (default OIDC_DEFAULT_SCOPES; `openid` is added when missing). */
  scopes?: readonly string[];
  /** The claim carrying the person's groups (for example `groups`); absent: no groups read. */
  groupsClaim?: string;
}

/** A discovered provider: the connection and the provider's validated metadata (plain JSON). */
export interface OidcProvider {
  connection: OidcConnection;
  /** The issuer exactly as the provider's metadata states it (equal to the connection's). */
  issuer: string;
  /** The authorization server metadata (cacheable; no secret in it). */
  metadata: Readonly<Record<string, unknown>>;
  /** Request timeout in milliseconds for the code exchange and userinfo. */
  timeoutMs: number;
}

/** What the browser carries from start to callback (in the signed transaction cookie). */
export interface OidcTransaction {
  v: 1;
  connectionId: string;
  issuer: string;
  state: string;
  nonce: string;
  /** The PKCE verifier (S256): only useful together with a code issued for its challenge. */
  codeVerifier: string;
  /** The exact `redirect_uri` sent; the code exchange repeats it. */
  redirectUri: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** Who signed in. */
export interface OidcIdentity {
  /** `oidc:<connection id>:<issuer>#<sub>`: the authorisation key (rule 7). */
  subject: string;
  /** The verified email, normalised (trimmed, lower-cased). */
  email: string;
  /** The live group snapshot from the connection's group claim (empty when none). */
  groups: string[];
  issuer: string;
  /** The provider's immutable subject identifier. */
  sub: string;
  /** The ID token's claims, completed from userinfo when the token lacked email or groups. */
  claims: Record<string, unknown>;
}

const CONNECTION_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
const DOMAIN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

const refused = (refusal: OidcRefusal, what: string) =>
  new IdentityError('ERR_IDENTITY_OIDC_REFUSED', `OIDC sign-in refused (${refusal}): ${what}`, { refusal });
const unavailable = (refusal: OidcRefusal, what: string) =>
  new IdentityError('ERR_IDENTITY_OIDC_UNAVAILABLE', `OIDC provider unavailable (${refusal}): ${what}`, {
    refusal,
  });
const badArgument = (what: string) => new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', what);

/** True for `https:` URLs and `http:` on a loopback host (tests and local providers only). */
function secureOrLoopback(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname));
}

/**
 * Checks a connection's shape. Throws ERR_IDENTITY_INVALID_ARGUMENT naming the field (never its
 * value). Returns the issuer URL.
 */
export function checkOidcConnection(connection: OidcConnection): URL {
  if (connection === null || typeof connection !== 'object')
    throw badArgument('connection must be an object');
  if (typeof connection.id !== 'string' || !CONNECTION_ID.test(connection.id))
    throw badArgument('connection id must be 1-64 of a-z, 0-9 and -');
  let issuer: URL;
  try {
    issuer = new URL(connection.issuer);
  } catch {
    throw badArgument('connection issuer is not a URL');
  }
  if (!secureOrLoopback(issuer)) throw badArgument('connection issuer must be https (http only on loopback)');
  if (issuer.search !== '' || issuer.hash !== '' || connection.issuer.includes('#') || issuer.username !== '')
    throw badArgument('connection issuer must have no query, fragment or credentials');
  if (
    typeof connection.clientId !== 'string' ||
    connection.clientId.length === 0 ||
    connection.clientId.length > 512
  )
    throw badArgument('connection clientId must be a non-empty string');
  if (
    connection.clientSecret !== undefined &&
    (typeof connection.clientSecret !== 'string' || connection.clientSecret.length === 0)
  )
    throw badArgument('connection clientSecret must be a non-empty string when set');
  if (!Array.isArray(connection.allowedEmailDomains) || connection.allowedEmailDomains.length === 0)
    throw badArgument('connection allowedEmailDomains must list at least one domain');
  for (const d of connection.allowedEmailDomains)
    if (typeof d !== 'string' || !DOMAIN.test(d.toLowerCase()))
      throw badArgument('connection allowedEmailDomains holds something that is not a domain');
  if (connection.scopes !== undefined) {
    if (!Array.isArray(connection.scopes)) throw badArgument('connection scopes must be a list');
    for (const s of connection.scopes)
      if (typeof s !== 'string' || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s))
        throw badArgument('connection scopes holds something that is not a scope token');
  }
  if (
    connection.groupsClaim !== undefined &&
    (typeof connection.groupsClaim !== 'string' || connection.groupsClaim.length === 0)
  )
    throw badArgument('connection groupsClaim must be a non-empty string when set');
  return issuer;
}

/** The subject of an OIDC caller: `oidc:<connection id>:<issuer>#<sub>` (rule 7). */
export function oidcSubject(connectionId: string, issuer: string, sub: string): string {
  if (!CONNECTION_ID.test(connectionId)) throw badArgument('connection id must be 1-64 of a-z, 0-9 and -');
  if (issuer.length === 0 || issuer.includes('#')) throw badArgument('issuer must be non-empty, without #');
  if (sub.length === 0 || sub.length > 255) throw badArgument('sub must be 1 to 255 characters');
  return `oidc:${connectionId}:${issuer}#${sub}`;
}

/** The provider's errors, as a refusal with a reason code (never the provider's text). */
function mapError(err: unknown, stage: 'discovery' | 'exchange' | 'userinfo'): IdentityError {
  if (err instanceof IdentityError) return err;
  const name = (err as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError')
    return unavailable('provider-unreachable', `the ${stage} request timed out`);
  if (err instanceof oidc.ResponseBodyError) {
    if (stage === 'exchange' && err.error === 'invalid_grant')
      return refused(
        'code-rejected',
        'the provider refused the code (replayed, expired, foreign, or PKCE mismatch)',
      );
    return refused('exchange-failed', `the provider answered the ${stage} request with an error`);
  }
  if (err instanceof oidc.AuthorizationResponseError)
    return refused('provider-error', 'the authorization response is an error');
  if (err instanceof oidc.ClientError) {
    const cause = err.cause as
      | { code?: string; cause?: { claim?: unknown; attribute?: unknown } }
      | undefined;
    const claim = cause?.cause?.claim;
    const attribute = cause?.cause?.attribute;
    switch (err.code) {
      case 'OAUTH_JWT_CLAIM_COMPARISON_FAILED':
        if (claim === 'nonce')
          return refused('nonce-mismatch', 'the ID token nonce is not the transaction one');
        if (claim === 'iss')
          return refused('issuer-mismatch', 'the ID token issuer is not the connection one');
        if (claim === 'aud' || claim === 'azp')
          return refused('audience-mismatch', 'the ID token is not for this client');
        return refused('id-token-invalid', 'an ID token claim did not match');
      case 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED':
        if (claim === 'exp') return refused('token-expired', 'the ID token has expired');
        return refused('token-time-invalid', 'an ID token time claim is out of range');
      case 'OAUTH_TIMEOUT':
      case 'OAUTH_ABORT':
        return unavailable('provider-unreachable', `the ${stage} request timed out`);
      case 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED':
        // At discovery openid-client compares the metadata issuer itself (no cause attached).
        if (stage === 'discovery' || attribute === 'issuer')
          return unavailable('issuer-mismatch', 'the provider metadata names another issuer');
        return refused('response-invalid', `the ${stage} response did not match`);
      case 'OAUTH_RESPONSE_IS_NOT_CONFORM':
      case 'OAUTH_RESPONSE_IS_NOT_JSON':
      case 'OAUTH_PARSE_ERROR':
      case 'OAUTH_INVALID_RESPONSE':
      case 'OAUTH_INVALID_SERVER_METADATA':
      case 'OAUTH_MISSING_SERVER_METADATA':
        return stage === 'discovery'
          ? unavailable('metadata-invalid', 'the provider metadata could not be read')
          : refused(
              stage === 'exchange' ? 'exchange-failed' : 'response-invalid',
              `the ${stage} response is invalid`,
            );
      case 'OAUTH_HTTP_REQUEST_FORBIDDEN':
      case 'OAUTH_REQUEST_PROTOCOL_FORBIDDEN':
        return unavailable('metadata-invalid', 'the provider names an endpoint that is not https');
      default:
        if (err.cause instanceof TypeError)
          return unavailable('provider-unreachable', `the ${stage} request failed`);
        return stage === 'discovery'
          ? unavailable('metadata-invalid', 'the provider metadata was refused')
          : refused('id-token-invalid', `the ${stage} response was refused`);
    }
  }
  if (err instanceof TypeError) return unavailable('provider-unreachable', `the ${stage} request failed`);
  return refused(stage === 'discovery' ? 'metadata-invalid' : 'exchange-failed', `the ${stage} step failed`);
}

function clientAuth(
  connection: OidcConnection,
  metadata: Readonly<Record<string, unknown>>,
): oidc.ClientAuth {
  if (connection.clientSecret === undefined) return oidc.None();
  const supported = metadata.token_endpoint_auth_methods_supported;
  // client_secret_basic is the protocol default; post only when the provider lists post and not basic.
  if (
    Array.isArray(supported) &&
    supported.includes('client_secret_post') &&
    !supported.includes('client_secret_basic')
  )
    return oidc.ClientSecretPost(connection.clientSecret);
  return oidc.ClientSecretBasic(connection.clientSecret);
}

/** An openid-client configuration for one request (never kept: the secret stays in `connection`). */
function configurationOf(provider: OidcProvider, clockSkewSeconds = 0): oidc.Configuration {
  const { connection, metadata } = provider;
  const clientMetadata: Partial<oidc.ClientMetadata> = { [oidc.clockSkew]: clockSkewSeconds };
  const config = new oidc.Configuration(
    metadata as unknown as oidc.ServerMetadata,
    connection.clientId,
    clientMetadata,
    clientAuth(connection, metadata),
  );
  config.timeout = Math.max(1, Math.ceil(provider.timeoutMs / 1000));
  if (new URL(provider.issuer).protocol === 'http:') oidc.allowInsecureRequests(config);
  return config;
}

/**
 * Discovers the provider (`<issuer>/.well-known/openid-configuration`), checks that the metadata
 * names this issuer exactly and that its endpoints are https (http only on a loopback host, and
 * only for a loopback issuer), and that it can do the authorization code flow with PKCE S256.
 * Throws ERR_IDENTITY_INVALID_ARGUMENT for a bad connection and ERR_IDENTITY_OIDC_UNAVAILABLE
 * (`provider-unreachable`, `issuer-mismatch`, `metadata-invalid`) for a provider that cannot be
 * used. The result holds plain metadata the engine may cache.
 */
export async function discoverOidcProvider(
  connection: OidcConnection,
  options: { timeoutMs?: number } = {},
): Promise<OidcProvider> {
  const issuerUrl = checkOidcConnection(connection);
  const timeoutMs = options.timeoutMs ?? OIDC_DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 120_000)
    throw badArgument('timeoutMs must be 100 ms to 2 minutes');
  const insecure = issuerUrl.protocol === 'http:';
  let config: oidc.Configuration;
  // openid-client's own timeout is whole seconds; a signal bounds the discovery to the millisecond.
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    config = await oidc.discovery(issuerUrl, connection.clientId, undefined, oidc.None(), {
      timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
      ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
      [oidc.customFetch]: (url, init) => fetch(url, { ...(init as RequestInit), signal }),
    });
  } catch (err) {
    throw mapError(err, 'discovery');
  }
  const metadata = { ...config.serverMetadata() } as Record<string, unknown>;
  for (const k of Object.keys(metadata)) if (typeof metadata[k] === 'function') delete metadata[k];
  if (metadata.issuer !== connection.issuer)
    throw unavailable('issuer-mismatch', 'the provider metadata names another issuer');
  for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const)
    if (typeof metadata[field] !== 'string')
      throw unavailable('metadata-invalid', `the provider metadata has no ${field}`);
  for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri', 'userinfo_endpoint']) {
    const value = metadata[field];
    if (value === undefined) continue;
    let url: URL;
    try {
      url = new URL(String(value));
    } catch {
      throw unavailable('metadata-invalid', `the provider metadata ${field} is not a URL`);
    }
    if (url.protocol !== 'https:' && !(insecure && secureOrLoopback(url)))
      throw unavailable('metadata-invalid', `the provider metadata ${field} is not https`);
  }
  const methods = metadata.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes('S256'))
    throw unavailable('metadata-invalid', 'the provider does not support PKCE S256');
  return { connection, issuer: connection.issuer, metadata: Object.freeze(metadata), timeoutMs };
}

/**
 * Starts a sign-in: the authorization URL (code flow, `state`, `nonce`, PKCE S256, the scopes, the
 * caller's `redirect_uri`) and the transaction to keep in the signed transaction cookie
 * (encodeOidcTransaction). `redirectUri` must be https (http only on loopback) with no fragment.
 */
export async function oidcStart(
  provider: OidcProvider,
  options: { redirectUri: string; ttlMs?: number; now?: number },
): Promise<{ authorizationUrl: string; transaction: OidcTransaction }> {
  let redirect: URL;
  try {
    redirect = new URL(options.redirectUri);
  } catch {
    throw badArgument('redirectUri is not a URL');
  }
  if (!secureOrLoopback(redirect) || redirect.hash !== '' || redirect.href !== options.redirectUri)
    throw badArgument('redirectUri must be a normalised https URL (http only on loopback) without fragment');
  const ttl = options.ttlMs ?? OIDC_TRANSACTION_TTL_MS;
  if (!Number.isInteger(ttl) || ttl < 10_000 || ttl > 60 * 60 * 1000)
    throw badArgument('transaction lifetime must be 10 s to 1 hour');
  const scopes = [...(provider.connection.scopes ?? OIDC_DEFAULT_SCOPES)];
  if (!scopes.includes('openid')) scopes.unshift('openid');
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const url = oidc.buildAuthorizationUrl(configurationOf(provider), {
    response_type: 'code',
    redirect_uri: options.redirectUri,
    scope: [...new Set(scopes)].join(' '),
    state,
    nonce,
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
  });
  return {
    authorizationUrl: url.href,
    transaction: {
      v: 1,
      connectionId: provider.connection.id,
      issuer: provider.issuer,
      state,
      nonce,
      codeVerifier,
      redirectUri: options.redirectUri,
      expiresAt: (options.now ?? Date.now()) + ttl,
    },
  };
}

// ---- the transaction cookie ------------------------------------------------------------------

const TX_LABEL = 'coffer-oidc-tx\u0000';

function checkTxKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.byteLength < 32)
    throw badArgument('transaction key must be at least 32 bytes');
}

const mac = (key: Uint8Array, body: string) =>
  createHmac('sha256', key).update(TX_LABEL).update(body).digest('base64url');

/**
 * The transaction cookie value: `<base64url(JSON)>.<HMAC-SHA256(key, "coffer-oidc-tx\0" ||
 * body)>`. Signed, not encrypted: the browser that holds it may read its state, nonce and verifier,
 * which are of use only with a code issued to that browser.
 */
export function encodeOidcTransaction(key: Uint8Array, transaction: OidcTransaction): string {
  checkTxKey(key);
  const body = Buffer.from(JSON.stringify(transaction)).toString('base64url');
  return `${body}.${mac(key, body)}`;
}

const STRING_FIELDS = ['connectionId', 'issuer', 'state', 'nonce', 'codeVerifier', 'redirectUri'] as const;

/**
 * Reads a transaction cookie value. Throws ERR_IDENTITY_OIDC_REFUSED with `transaction-invalid`
 * (absent, malformed, signed with another key, tampered) or `transaction-expired`.
 */
export function decodeOidcTransaction(
  key: Uint8Array,
  value: string | null | undefined,
  options: { now?: number } = {},
): OidcTransaction {
  checkTxKey(key);
  const invalid = () =>
    refused('transaction-invalid', 'the transaction cookie is missing, malformed or tampered');
  if (typeof value !== 'string' || value.length === 0 || value.length > 4096) throw invalid();
  const dot = value.indexOf('.');
  if (dot <= 0) throw invalid();
  const body = value.slice(0, dot);
  const got = Buffer.from(value.slice(dot + 1));
  const want = Buffer.from(mac(key, body));
  if (got.length !== want.length || !timingSafeEqual(got, want)) throw invalid();
  let tx: Record<string, unknown>;
  try {
    tx = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (tx === null || typeof tx !== 'object' || tx.v !== 1 || typeof tx.expiresAt !== 'number')
    throw invalid();
  for (const f of STRING_FIELDS)
    if (typeof tx[f] !== 'string' || (tx[f] as string).length === 0) throw invalid();
  if ((options.now ?? Date.now()) >= tx.expiresAt)
    throw refused('transaction-expired', 'the sign-in took longer than the transaction lives');
  return tx as unknown as OidcTransaction;
}

/** `Set-Cookie` value carrying a transaction (`Path=/`, Secure, HttpOnly, SameSite=Lax). */
export function oidcTransactionCookie(value: string, maxAgeSeconds: number): string {
  if (!/^[A-Za-z0-9._-]*$/.test(value))
    throw badArgument('transaction cookie values are base64url text only');
  return `${OIDC_TRANSACTION_COOKIE}=${value}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; Secure; HttpOnly; SameSite=Lax`;
}

// ---- the callback -------------------------------------------------------------------------------

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  // Compare equal lengths only; a length difference is itself the answer, and leaks only a length.
  return x.length === y.length && timingSafeEqual(x, y);
}

function groupsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (!Array.isArray(value)) return [];
  return [...new Set(value.filter((g): g is string => typeof g === 'string' && g.length > 0))];
}

/**
 * Finishes a sign-in. `callbackUrl` is the URL the browser was sent back to (only its query is
 * read; the exchange repeats the transaction's `redirect_uri` exactly). In order: the transaction
 * (unexpired, for this connection and issuer), `state` (constant time), the `iss` parameter (RFC
 * 9207, required when the provider advertises it), a provider error, the code exchanged with the
 * PKCE verifier, the ID token (signature and algorithm, `iss`, `aud`/`azp`, `nonce`, `exp` with
 * 30 s tolerance; openid-client checks each, and they are checked again here), the email
 * (`email_verified === true`, an allowed domain). Missing email or groups are read from userinfo
 * when the provider has it (its `sub` must match). Throws ERR_IDENTITY_OIDC_REFUSED or
 * ERR_IDENTITY_OIDC_UNAVAILABLE with the reason in `refusal`.
 *
 * `now` (milliseconds) stands in for the clock: tests, and a host whose clock is known to be off.
 */
export async function oidcCallback(
  provider: OidcProvider,
  transaction: OidcTransaction,
  callbackUrl: string | URL,
  options: { now?: number } = {},
): Promise<OidcIdentity> {
  const now = options.now ?? Date.now();
  const { connection } = provider;
  if (now >= transaction.expiresAt)
    throw refused('transaction-expired', 'the sign-in took longer than the transaction lives');
  if (transaction.connectionId !== connection.id || transaction.issuer !== provider.issuer)
    throw refused('connection-mismatch', 'the transaction was started for another connection');

  let params: URLSearchParams;
  try {
    params = new URL(callbackUrl).searchParams;
  } catch {
    throw refused('response-invalid', 'the callback URL is not a URL');
  }
  const state = params.getAll('state');
  if (state.length !== 1 || !sameText(state[0]!, transaction.state))
    throw refused('state-mismatch', 'the callback state is not the transaction one');
  const iss = params.getAll('iss');
  if (iss.length > 1 || (iss.length === 1 && iss[0] !== provider.issuer))
    throw refused('issuer-mismatch', 'the authorization response comes from another issuer');
  if (iss.length === 0 && provider.metadata.authorization_response_iss_parameter_supported === true)
    throw refused('issuer-mismatch', 'the authorization response does not name its issuer');
  if (params.has('error')) throw refused('provider-error', 'the authorization response is an error');
  if (params.getAll('code').length !== 1)
    throw refused('response-invalid', 'the callback carries no single code');

  // The exchange goes to the redirect_uri the transaction sent, with the callback's parameters.
  const current = new URL(transaction.redirectUri);
  current.search = params.toString();
  const config = configurationOf(provider, Math.round((now - Date.now()) / 1000));
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(config, current, {
      expectedState: transaction.state,
      expectedNonce: transaction.nonce,
      pkceCodeVerifier: transaction.codeVerifier,
      idTokenExpected: true,
    });
  } catch (err) {
    throw mapError(err, 'exchange');
  }
  const idClaims = tokens.claims();
  if (idClaims === undefined) throw refused('id-token-invalid', 'the provider returned no ID token');

  // Belt and braces: openid-client checked these; a refactor there must not loosen them here.
  if (idClaims.iss !== provider.issuer)
    throw refused('issuer-mismatch', 'the ID token issuer is not the connection one');
  const aud = Array.isArray(idClaims.aud) ? idClaims.aud : [idClaims.aud];
  if (!aud.includes(connection.clientId))
    throw refused('audience-mismatch', 'the ID token is not for this client');
  if (aud.length > 1 && idClaims.azp !== connection.clientId)
    throw refused('audience-mismatch', 'the ID token is for several clients and names another');
  if (typeof idClaims.nonce !== 'string' || !sameText(idClaims.nonce, transaction.nonce))
    throw refused('nonce-mismatch', 'the ID token nonce is not the transaction one');
  if (typeof idClaims.exp !== 'number' || idClaims.exp + 30 <= Math.floor(now / 1000))
    throw refused('token-expired', 'the ID token has expired');
  const sub = idClaims.sub;
  if (typeof sub !== 'string' || sub.length === 0 || sub.length > 255)
    throw refused('id-token-invalid', 'the ID token sub is missing or too long');

  const claims: Record<string, unknown> = { ...idClaims };
  const groupsClaim = connection.groupsClaim;
  const lacking =
    claims.email === undefined ||
    claims.email_verified === undefined ||
    (groupsClaim !== undefined && claims[groupsClaim] === undefined);
  if (lacking && typeof provider.metadata.userinfo_endpoint === 'string' && tokens.access_token) {
    let info: Record<string, unknown>;
    try {
      info = { ...(await oidc.fetchUserInfo(config, tokens.access_token, sub)) };
    } catch (err) {
      throw mapError(err, 'userinfo');
    }
    for (const [k, v] of Object.entries(info)) if (claims[k] === undefined) claims[k] = v;
  }

  if (typeof claims.email !== 'string') throw refused('email-missing', 'the provider sent no email');
  if (claims.email_verified !== true)
    throw refused('email-unverified', 'the provider does not vouch for the email');
  let email: string;
  try {
    email = normaliseEmail(claims.email);
  } catch {
    throw refused('email-missing', 'the provider sent an email that is not an address');
  }
  const domain = email.slice(email.lastIndexOf('@') + 1);
  if (!connection.allowedEmailDomains.some((d) => d.toLowerCase() === domain))
    throw refused('email-domain', 'the email domain is not allowed on this connection');

  return {
    subject: oidcSubject(connection.id, provider.issuer, sub),
    email,
    groups: groupsClaim === undefined ? [] : groupsOf(claims[groupsClaim]),
    issuer: provider.issuer,
    sub,
    claims,
  };
}

// ---- group-to-role mapping ---------------------------------------------------------------------

/** One mapping row: members of `group` get `role`. */
export interface GroupRoleRule {
  group: string;
  role: string;
}

/**
 * The role a sign-in's group snapshot maps to: the first rule, in the mapping's order (highest
 * precedence first), whose group the person is in; null when none matches. Groups compare
 * exactly (case-sensitive: provider group ids are opaque). Throws ERR_IDENTITY_INVALID_ARGUMENT
 * for a malformed mapping.
 */
export function roleForGroups(mapping: readonly GroupRoleRule[], groups: readonly string[]): string | null {
  if (!Array.isArray(mapping)) throw badArgument('group mapping must be a list');
  for (const rule of mapping)
    if (
      rule === null ||
      typeof rule !== 'object' ||
      typeof rule.group !== 'string' ||
      rule.group.length === 0 ||
      typeof rule.role !== 'string' ||
      rule.role.length === 0
    )
      throw badArgument('each group mapping row needs a non-empty group and role');
  if (!Array.isArray(groups)) throw badArgument('groups must be a list');
  const held = new Set(groups.filter((g) => typeof g === 'string'));
  for (const rule of mapping) if (held.has(rule.group)) return rule.role;
  return null;
}

/** A random key for transaction cookies when the caller keeps a dedicated one (32 bytes). */
export function newOidcTransactionKey(): Uint8Array {
  return new Uint8Array(randomBytes(32));
}
