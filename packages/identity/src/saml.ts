/**
 * SAML 2.0 sign-in: the service-provider side, on `@node-saml/node-saml` (v5).
 *
 * The engine keeps connections (the identity provider's entity id, single sign-on URL and signing
 * certificates, allowed email domains, the email and group attributes, and its own entity id and
 * assertion consumer URL) and wires three routes; this module does the protocol: the identity
 * provider's metadata (parsed without a DTD, or fetched over https with a timeout and a size cap),
 * the service provider's own metadata, the AuthnRequest (HTTP-Redirect binding, persistent NameID)
 * whose ID the engine binds to a single-use RelayState, and the assertion consumer: a signed
 * assertion (the Response's signature alone is not enough), its issuer, audience, recipient,
 * time window with a bounded clock skew and InResponseTo, a persistent NameID, an email in an
 * allowed domain, and the subject `saml:<connection id>:<entity id>#<NameID>` (rule 7: never the
 * email).
 *
 * node-saml verifies the signature (against the connection's certificates only, never a key the
 * response carries), refuses a second assertion and checks audience and time; every value the
 * result holds is then read again from the verified assertion alone and checked here, including
 * what node-saml does not check (Recipient, Destination, the issuer, InResponseTo).
 *
 * Every refusal is an IdentityError, ERR_IDENTITY_SAML_REFUSED (or ERR_IDENTITY_SAML_UNAVAILABLE
 * when the provider's metadata cannot be fetched or read) with `refusal` set to a stable reason
 * code. Messages never carry an assertion, a NameID, an attribute value or a certificate.
 */
import { randomBytes, timingSafeEqual, X509Certificate } from 'node:crypto';
import {
  generateServiceProviderMetadata,
  SAML,
  SamlStatusError,
  ValidateInResponseTo,
} from '@node-saml/node-saml';
import { DOMParser } from '@xmldom/xmldom';
import { IdentityError, type SamlRefusal } from './errors.ts';
import { normaliseEmail } from './people.ts';

/** Tolerated clock difference with the identity provider unless the connection sets it: 120 s. */
export const SAML_DEFAULT_CLOCK_SKEW_SECONDS = 120;
/** The largest clock skew a connection may set: 300 s. */
export const SAML_MAX_CLOCK_SKEW_SECONDS = 300;
/** The largest `SAMLResponse` form field read (base64 text, before decoding): 256 KiB. */
export const SAML_RESPONSE_MAX_CHARS = 256 * 1024;
/** The largest identity-provider metadata document read (pasted or fetched): 1 MiB. */
export const SAML_METADATA_MAX_BYTES = 1024 * 1024;
/** A metadata fetch gives up after this unless set: 10 seconds. */
export const SAML_DEFAULT_TIMEOUT_MS = 10_000;
/** The only NameID format accepted (and the one the AuthnRequest asks for). */
export const SAML_NAMEID_PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
/** Attributes read for the email, in this order, when the connection names none. */
export const SAML_DEFAULT_EMAIL_ATTRIBUTES: readonly string[] = [
  'email',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
  'urn:oid:0.9.2342.19200300.100.1.3',
  'mail',
];

/** One identity-provider connection, as the engine holds it in memory. */
export interface SamlConnection {
  /** The connection id: 1 to 64 of `a-z`, `0-9` and `-`, starting with a letter or digit. */
  id: string;
  /** The identity provider's entity id (1 to 1024 characters, no `#`, no control character). */
  idpEntityId: string;
  /** Where AuthnRequests go (HTTP-Redirect binding): `https://` (http only on a loopback host). */
  idpSsoUrl: string;
  /**
   * The identity provider's signing certificates (PEM, or base64 DER as in metadata): at least
   * one; an assertion must be signed by one of them. Several during a key rollover.
   */
  idpCertificates: readonly string[];
  /**
   * Email domains allowed to sign in (exact, case-insensitive; `example.org` does not admit
   * `sub.example.org`). At least one: a connection never admits every account of a provider.
   */
  allowedEmailDomains: readonly string[];
  /** The attribute carrying the email; absent: SAML_DEFAULT_EMAIL_ATTRIBUTES, first present. */
  emailAttribute?: string;
  /** The attribute carrying the person's groups (multi-valued); absent: no groups read. */
  groupsAttribute?: string;
  /** This engine's entity id: the audience every assertion must name. */
  spEntityId: string;
  /** The assertion consumer URL (HTTP-POST): `https://` (http only on a loopback host). */
  acsUrl: string;
  /** Tolerated clock difference, whole seconds, 0 to 300 (default 120). */
  clockSkewSeconds?: number;
}

/** What an identity provider's metadata says, as a connection needs it. */
export interface SamlIdpMetadata {
  /** The EntityDescriptor's `entityID`. */
  entityId: string;
  /** The SingleSignOnService with the HTTP-Redirect binding. */
  ssoUrl: string;
  /** The signing certificates (KeyDescriptor `use="signing"` or without `use`), as PEM. */
  certificates: string[];
}

/** Who signed in. */
export interface SamlIdentity {
  /** `saml:<connection id>:<entity id>#<NameID>`: the authorisation key (rule 7). */
  subject: string;
  /** The email from the email attribute, normalised (trimmed, lower-cased). */
  email: string;
  /** The group snapshot from the connection's group attribute (empty when none). */
  groups: string[];
  /** The identity provider's entity id (the assertion's Issuer, equal to the connection's). */
  entityId: string;
  /** The persistent NameID, unchanged. */
  nameId: string;
  /** The AuthnStatement's `SessionNotOnOrAfter`, when the provider bounds the session. */
  sessionNotOnOrAfter?: Date;
  /** Every attribute of the verified assertion by name, each a list of its text values. */
  attributes: Record<string, string[]>;
}

const CONNECTION_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
const DOMAIN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
const CONTROL = /[\u0000-\u001f\u007f]/;
const RELAY_STATE = /^[A-Za-z0-9._~-]{1,80}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
// xs:dateTime as SAML requires it: UTC, no other zone.
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;

const NS_MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
const NS_DS = 'http://www.w3.org/2000/09/xmldsig#';
const NS_SAMLP = 'urn:oasis:names:tc:SAML:2.0:protocol';
const NS_SAML = 'urn:oasis:names:tc:SAML:2.0:assertion';
const PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
const BINDING_REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const STATUS_SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
// SHA-1 digests and signatures are refused (a collision-prone hash under a signature).
const WEAK_ALGORITHMS = new Set([
  'http://www.w3.org/2000/09/xmldsig#sha1',
  'http://www.w3.org/2000/09/xmldsig#rsa-sha1',
  'http://www.w3.org/2000/09/xmldsig#dsa-sha1',
  'http://www.w3.org/2000/09/xmldsig#hmac-sha1',
  'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha1',
]);

const refused = (refusal: SamlRefusal, what: string) =>
  new IdentityError('ERR_IDENTITY_SAML_REFUSED', `SAML sign-in refused (${refusal}): ${what}`, { refusal });
const unavailable = (refusal: SamlRefusal, what: string) =>
  new IdentityError('ERR_IDENTITY_SAML_UNAVAILABLE', `SAML provider unavailable (${refusal}): ${what}`, {
    refusal,
  });
const badArgument = (what: string) => new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', what);

/** True for `https:` URLs and `http:` on a loopback host (tests and local providers only). */
function secureOrLoopback(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname));
}

/** Null when `value` is an https URL (http only on loopback) without fragment or credentials. */
function endpointProblem(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > 2048) return 'is not a URL';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (!secureOrLoopback(url)) return 'must be https (http only on loopback)';
  if (url.hash !== '' || value.includes('#') || url.username !== '' || url.password !== '')
    return 'must have no fragment or credentials';
  return null;
}

function entityIdProblem(value: unknown): boolean {
  return (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 1024 ||
    value.includes('#') ||
    CONTROL.test(value) ||
    value.trim() !== value
  );
}

/** A certificate (PEM, or base64 DER with any whitespace) as PEM; null when it is not one. */
function certificatePem(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64 * 1024) return null;
  const pem = /^\s*-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----\s*$/.exec(value);
  const body = (pem ? pem[1]! : value).replace(/\s+/g, '');
  if (!BASE64.test(body) || body.length % 4 !== 0) return null;
  try {
    return new X509Certificate(Buffer.from(body, 'base64')).toString();
  } catch {
    return null;
  }
}

/**
 * Checks a connection's shape. Throws ERR_IDENTITY_INVALID_ARGUMENT naming the field (never its
 * value).
 */
export function checkSamlConnection(connection: SamlConnection): void {
  if (connection === null || typeof connection !== 'object')
    throw badArgument('connection must be an object');
  if (typeof connection.id !== 'string' || !CONNECTION_ID.test(connection.id))
    throw badArgument('connection id must be 1-64 of a-z, 0-9 and -');
  if (entityIdProblem(connection.idpEntityId))
    throw badArgument('connection idpEntityId must be 1-1024 characters without # or control characters');
  const sso = endpointProblem(connection.idpSsoUrl);
  if (sso !== null) throw badArgument(`connection idpSsoUrl ${sso}`);
  if (!Array.isArray(connection.idpCertificates) || connection.idpCertificates.length === 0)
    throw badArgument('connection idpCertificates must list at least one certificate');
  if (connection.idpCertificates.length > 10)
    throw badArgument('connection idpCertificates lists more than 10 certificates');
  for (const c of connection.idpCertificates)
    if (certificatePem(c) === null)
      throw badArgument('connection idpCertificates holds something that is not a certificate');
  if (!Array.isArray(connection.allowedEmailDomains) || connection.allowedEmailDomains.length === 0)
    throw badArgument('connection allowedEmailDomains must list at least one domain');
  for (const d of connection.allowedEmailDomains)
    if (typeof d !== 'string' || !DOMAIN.test(d.toLowerCase()))
      throw badArgument('connection allowedEmailDomains holds something that is not a domain');
  for (const field of ['emailAttribute', 'groupsAttribute'] as const) {
    const value = connection[field];
    if (
      value !== undefined &&
      (typeof value !== 'string' || value.length === 0 || value.length > 1024 || CONTROL.test(value))
    )
      throw badArgument(`connection ${field} must be a non-empty string when set`);
  }
  if (entityIdProblem(connection.spEntityId))
    throw badArgument('connection spEntityId must be 1-1024 characters without # or control characters');
  const acs = endpointProblem(connection.acsUrl);
  if (acs !== null) throw badArgument(`connection acsUrl ${acs}`);
  const skew = connection.clockSkewSeconds;
  if (skew !== undefined && (!Number.isInteger(skew) || skew < 0 || skew > SAML_MAX_CLOCK_SKEW_SECONDS))
    throw badArgument('connection clockSkewSeconds must be a whole number from 0 to 300');
}

/** The subject of a SAML caller: `saml:<connection id>:<entity id>#<NameID>` (rule 7). */
export function samlSubject(connectionId: string, entityId: string, nameId: string): string {
  if (!CONNECTION_ID.test(connectionId)) throw badArgument('connection id must be 1-64 of a-z, 0-9 and -');
  if (entityIdProblem(entityId))
    throw badArgument('entity id must be 1-1024 characters without # or control characters');
  if (typeof nameId !== 'string' || nameId.length === 0 || nameId.length > 256)
    throw badArgument('NameID must be 1 to 256 characters');
  return `saml:${connectionId}:${entityId}#${nameId}`;
}

/**
 * The SHA-256 fingerprint of a certificate (PEM or base64 DER) as lower-case hex without
 * separators: what the engine shows for a connection's certificates. Throws
 * ERR_IDENTITY_INVALID_ARGUMENT when it is not a certificate.
 */
export function samlCertificateFingerprint(certificate: string): string {
  const pem = certificatePem(certificate);
  if (pem === null) throw badArgument('certificate is not a certificate');
  return new X509Certificate(pem).fingerprint256.replaceAll(':', '').toLowerCase();
}

// ---- XML ------------------------------------------------------------------------------------

/**
 * Parses XML with no DTD at all: a document holding `<!DOCTYPE` or `<!ENTITY` is refused before
 * parsing (xmldom never fetches external entities, and none are declared to expand). Null when
 * the text is not one well-formed document.
 */
function parseXml(text: string): Document | null {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) return null;
  let failed = false;
  const fail = () => {
    failed = true;
  };
  let doc: Document;
  try {
    doc = new DOMParser({
      locator: {},
      errorHandler: { warning: () => {}, error: fail, fatalError: fail },
    }).parseFromString(text, 'text/xml') as unknown as Document;
  } catch {
    return null;
  }
  if (failed || !doc || !doc.documentElement) return null;
  return doc;
}

/** The element children of `el` in namespace `ns` named `local`. */
function children(el: Element, ns: string, local: string): Element[] {
  const out: Element[] = [];
  for (let n = el.firstChild; n !== null; n = n.nextSibling)
    if (n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local)
      out.push(n as Element);
  return out;
}

function child(el: Element, ns: string, local: string): Element | undefined {
  return children(el, ns, local)[0];
}

function textOf(el: Element | undefined): string {
  return el?.textContent ?? '';
}

/** An attribute's value, or null when absent (xmldom answers '' for an absent attribute). */
function attr(el: Element, name: string): string | null {
  return el.hasAttribute(name) ? el.getAttribute(name) : null;
}

function is(el: Element, ns: string, local: string): boolean {
  return el.namespaceURI === ns && el.localName === local;
}

// ---- identity-provider metadata ---------------------------------------------------------------

/**
 * Reads an identity provider's metadata (one EntityDescriptor, at most 1 MiB, no DTD): the
 * `entityID`, the SingleSignOnService with the HTTP-Redirect binding (https; http only on a
 * loopback host) and the signing certificates (at least one). The metadata's own signature is not
 * checked: it is trusted because the owner pasted it or named its https URL. Throws
 * ERR_IDENTITY_INVALID_ARGUMENT saying what is wrong (never a value).
 */
export function parseIdpMetadata(xml: string): SamlIdpMetadata {
  if (typeof xml !== 'string' || xml.length === 0) throw badArgument('metadata must be a non-empty string');
  if (Buffer.byteLength(xml, 'utf8') > SAML_METADATA_MAX_BYTES)
    throw badArgument('metadata is larger than 1 MiB');
  const doc = parseXml(xml);
  if (doc === null) throw badArgument('metadata is not one well-formed XML document without a DTD');
  const root = doc.documentElement;
  if (is(root, NS_MD, 'EntitiesDescriptor'))
    throw badArgument('metadata must describe one entity (EntityDescriptor), not an aggregate');
  if (!is(root, NS_MD, 'EntityDescriptor')) throw badArgument('metadata root is not an EntityDescriptor');
  const entityId = attr(root, 'entityID') ?? '';
  if (entityIdProblem(entityId))
    throw badArgument('metadata entityID must be 1-1024 characters without # or control characters');
  const idp = children(root, NS_MD, 'IDPSSODescriptor').filter((d) =>
    (attr(d, 'protocolSupportEnumeration') ?? '').split(/\s+/).includes(PROTOCOL),
  );
  if (idp.length !== 1) throw badArgument('metadata must hold exactly one SAML 2.0 IDPSSODescriptor');
  const descriptor = idp[0]!;
  const redirect = children(descriptor, NS_MD, 'SingleSignOnService').filter(
    (s) => attr(s, 'Binding') === BINDING_REDIRECT,
  );
  if (redirect.length === 0)
    throw badArgument('metadata has no SingleSignOnService with the HTTP-Redirect binding');
  const ssoUrl = attr(redirect[0]!, 'Location') ?? '';
  const problem = endpointProblem(ssoUrl);
  if (problem !== null) throw badArgument(`metadata SingleSignOnService Location ${problem}`);
  const certificates: string[] = [];
  for (const key of children(descriptor, NS_MD, 'KeyDescriptor')) {
    const use = attr(key, 'use');
    if (use !== null && use !== '' && use !== 'signing') continue;
    for (const info of children(key, NS_DS, 'KeyInfo'))
      for (const data of children(info, NS_DS, 'X509Data'))
        for (const cert of children(data, NS_DS, 'X509Certificate')) {
          const pem = certificatePem(textOf(cert));
          if (pem === null) throw badArgument('metadata holds a signing certificate that cannot be read');
          if (!certificates.includes(pem)) certificates.push(pem);
        }
  }
  if (certificates.length === 0) throw badArgument('metadata has no signing certificate');
  if (certificates.length > 10) throw badArgument('metadata lists more than 10 signing certificates');
  return { entityId, ssoUrl, certificates };
}

/**
 * Fetches and reads an identity provider's metadata (parseIdpMetadata). The URL must be https
 * (http only on a loopback host), without credentials; redirects are refused, the body is read up
 * to 1 MiB and the whole fetch gives up after `timeoutMs` (default 10 s, 100 ms to 2 min). Throws
 * ERR_IDENTITY_INVALID_ARGUMENT for a bad URL or timeout and ERR_IDENTITY_SAML_UNAVAILABLE with
 * `metadata-unreachable` (refused, timed out, redirected, not 200) or `metadata-invalid` (too
 * large, unreadable).
 */
export async function fetchIdpMetadata(
  url: string,
  options: { timeoutMs?: number } = {},
): Promise<SamlIdpMetadata> {
  const problem = endpointProblem(url);
  if (problem !== null) throw badArgument(`metadata URL ${problem}`);
  const timeoutMs = options.timeoutMs ?? SAML_DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 120_000)
    throw badArgument('timeoutMs must be 100 ms to 2 minutes');
  const signal = AbortSignal.timeout(timeoutMs);
  let text: string;
  try {
    const response = await fetch(url, {
      redirect: 'error',
      signal,
      headers: { accept: 'application/samlmetadata+xml, application/xml, text/xml' },
    });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => {});
      throw unavailable('metadata-unreachable', 'the metadata URL did not answer 200');
    }
    const declared = Number(response.headers.get('content-length') ?? '0');
    if (declared > SAML_METADATA_MAX_BYTES) {
      await response.body?.cancel().catch(() => {});
      throw unavailable('metadata-invalid', 'the metadata is larger than 1 MiB');
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    if (response.body !== null) {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > SAML_METADATA_MAX_BYTES) {
          await reader.cancel().catch(() => {});
          throw unavailable('metadata-invalid', 'the metadata is larger than 1 MiB');
        }
        chunks.push(value);
      }
    }
    text = Buffer.concat(chunks).toString('utf8');
  } catch (err) {
    if (err instanceof IdentityError) throw err;
    const name = (err as { name?: unknown } | null)?.name;
    if (name === 'TimeoutError' || name === 'AbortError')
      throw unavailable('metadata-unreachable', 'the metadata request timed out');
    throw unavailable('metadata-unreachable', 'the metadata request failed (refused, redirected or reset)');
  }
  try {
    return parseIdpMetadata(text);
  } catch (err) {
    if (err instanceof IdentityError) throw unavailable('metadata-invalid', err.message);
    throw err;
  }
}

// ---- the service provider ------------------------------------------------------------------

/**
 * This engine's service-provider metadata for a connection (what the owner gives the identity
 * provider): `entityID` = spEntityId, one AssertionConsumerService (HTTP-POST) at acsUrl, the
 * persistent NameID format, `WantAssertionsSigned="true"`, no key (requests are not signed and
 * assertions are not encrypted).
 */
export function samlServiceProviderMetadata(connection: SamlConnection): string {
  checkSamlConnection(connection);
  return generateServiceProviderMetadata({
    issuer: connection.spEntityId,
    callbackUrl: connection.acsUrl,
    identifierFormat: SAML_NAMEID_PERSISTENT,
    wantAssertionsSigned: true,
  });
}

/** A node-saml instance for one call (nothing is cached between calls). */
function samlOf(
  connection: SamlConnection,
  extra: { acceptedClockSkewMs?: number; generateUniqueId?: () => string } = {},
): SAML {
  return new SAML({
    entryPoint: connection.idpSsoUrl,
    issuer: connection.spEntityId,
    callbackUrl: connection.acsUrl,
    audience: connection.spEntityId,
    idpIssuer: connection.idpEntityId,
    idpCert: connection.idpCertificates.map((c) => certificatePem(c)!),
    identifierFormat: SAML_NAMEID_PERSISTENT,
    allowCreate: true,
    // A requested AuthnContext makes many providers refuse MFA or Kerberos sign-ins; not asked.
    disableRequestedAuthnContext: true,
    wantAssertionsSigned: true,
    // Many providers sign only the assertion; the assertion's signature is what is required.
    wantAuthnResponseSigned: false,
    // InResponseTo is bound by the engine (single-use RelayState) and checked below.
    validateInResponseTo: ValidateInResponseTo.never,
    acceptedClockSkewMs: extra.acceptedClockSkewMs ?? 0,
    ...(extra.generateUniqueId ? { generateUniqueId: extra.generateUniqueId } : {}),
  });
}

/**
 * Starts a sign-in: the URL to send the browser to (HTTP-Redirect binding: a deflated, unsigned
 * AuthnRequest with a fresh ID, the ACS URL, NameIDPolicy persistent with AllowCreate, and the
 * RelayState) and the request ID the engine binds to the RelayState; the assertion must answer
 * that ID. `relayState` is the engine's single-use token: 1 to 80 of `A-Z a-z 0-9 . _ ~ -` (the
 * binding allows 80 bytes).
 */
export async function samlStart(
  connection: SamlConnection,
  options: { relayState: string },
): Promise<{ redirectUrl: string; requestId: string }> {
  checkSamlConnection(connection);
  if (typeof options?.relayState !== 'string' || !RELAY_STATE.test(options.relayState))
    throw badArgument('relayState must be 1-80 of A-Z, a-z, 0-9, ., _, ~ and -');
  // An xs:ID starts with a letter or underscore.
  const requestId = `_${randomBytes(20).toString('hex')}`;
  const saml = samlOf(connection, { generateUniqueId: () => requestId });
  const redirectUrl = await saml.getAuthorizeUrlAsync(options.relayState, undefined, {});
  return { redirectUrl, requestId };
}

// ---- the assertion consumer ------------------------------------------------------------------

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  // Compare equal lengths only; a length difference is itself the answer, and leaks only a length.
  return x.length === y.length && timingSafeEqual(x, y);
}

function instant(value: string | null, what: string): number | null {
  if (value === null) return null;
  const ms = INSTANT.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(ms)) throw refused('malformed', `${what} is not a UTC instant`);
  return ms;
}

/** Refuses SHA-1 in a signature's SignatureMethod or any DigestMethod. */
function checkAlgorithms(signature: Element): void {
  const signedInfo = child(signature, NS_DS, 'SignedInfo');
  if (signedInfo === undefined) throw refused('bad-signature', 'a signature has no SignedInfo');
  const methods = [
    ...children(signedInfo, NS_DS, 'SignatureMethod'),
    ...children(signedInfo, NS_DS, 'Reference').flatMap((r) => children(r, NS_DS, 'DigestMethod')),
  ];
  for (const m of methods)
    if (WEAK_ALGORITHMS.has(attr(m, 'Algorithm') ?? ''))
      throw refused('weak-algorithm', 'the signature uses SHA-1');
}

/** node-saml's errors, as a refusal with a reason code (never node-saml's text, which may quote). */
function mapError(err: unknown): IdentityError {
  if (err instanceof IdentityError) return err;
  if (err instanceof SamlStatusError) return refused('status', 'the provider answered with an error status');
  const message = String((err as { message?: unknown } | null)?.message ?? '');
  if (/not yet valid/i.test(message)) return refused('not-yet-valid', 'the assertion is not valid yet');
  if (/expired/i.test(message)) return refused('expired', 'the assertion has expired');
  if (/audience/i.test(message)) return refused('wrong-audience', 'the assertion is not for this service');
  if (/signature|signed|reference|transform|ID cannot/i.test(message))
    return refused('bad-signature', 'the assertion signature did not verify with a connection certificate');
  return refused('malformed', 'the response could not be read as a SAML response');
}

/** The assertion's attributes by name, each a list of its text values. */
function attributesOf(assertion: Element): Record<string, string[]> {
  const out: Record<string, string[]> = Object.create(null);
  for (const statement of children(assertion, NS_SAML, 'AttributeStatement'))
    for (const attribute of children(statement, NS_SAML, 'Attribute')) {
      const name = attr(attribute, 'Name');
      if (name === null || name.length === 0) continue;
      const values = children(attribute, NS_SAML, 'AttributeValue').map((v) => textOf(v));
      out[name] = [...(out[name] ?? []), ...values];
    }
  return { ...out };
}

/** The values of attribute `name` (own properties only: `toString` is not an attribute). */
function valuesOf(attributes: Record<string, string[]>, name: string): string[] | undefined {
  return Object.hasOwn(attributes, name) ? attributes[name] : undefined;
}

/**
 * Finishes a sign-in from the `SAMLResponse` form field (HTTP-POST binding). `expectedInResponseTo`
 * is the request ID samlStart returned, which the engine found bound to the single-use RelayState.
 * In order: the field (at most 256 KiB of base64), the document (well-formed, no DTD, a Response
 * with a Success status, exactly one Assertion and no EncryptedAssertion, the assertion carrying
 * its own signature, no SHA-1); node-saml then verifies the signature against the connection's
 * certificates only and checks audience and time; from the verified assertion alone: Issuer equals
 * idpEntityId (and the Response's, when present), the audience is spEntityId, a bearer
 * SubjectConfirmation whose Recipient is acsUrl, whose InResponseTo is the expected ID (constant
 * time; the Response's must not differ) and whose NotOnOrAfter has not passed, the Conditions'
 * NotBefore and NotOnOrAfter (each with the connection's clock skew), the Response's Destination
 * (when present) is acsUrl, a persistent NameID of 1 to 256 characters, exactly one email in an
 * allowed domain. Throws ERR_IDENTITY_SAML_REFUSED with the reason in `refusal`.
 *
 * `now` stands in for the clock: tests, and a host whose clock is known to be off.
 */
export async function samlAssertionConsumer(
  connection: SamlConnection,
  options: { samlResponse: string; expectedInResponseTo: string; now?: Date },
): Promise<SamlIdentity> {
  checkSamlConnection(connection);
  const { samlResponse, expectedInResponseTo, now } = options ?? {};
  if (
    typeof expectedInResponseTo !== 'string' ||
    expectedInResponseTo.length === 0 ||
    expectedInResponseTo.length > 256
  )
    throw badArgument('expectedInResponseTo must be the request ID samlStart returned');
  if (now !== undefined && !(now instanceof Date)) throw badArgument('now must be a Date');
  const nowMs = now === undefined ? Date.now() : now.getTime();
  if (!Number.isFinite(nowMs)) throw badArgument('now must be a valid date');
  const skewMs = (connection.clockSkewSeconds ?? SAML_DEFAULT_CLOCK_SKEW_SECONDS) * 1000;

  // ---- the document, before any library sees it
  if (typeof samlResponse !== 'string' || samlResponse.length === 0)
    throw refused('malformed', 'the SAMLResponse field is missing');
  if (samlResponse.length > SAML_RESPONSE_MAX_CHARS)
    throw refused('malformed', 'the SAMLResponse field is larger than 256 KiB');
  const compact = samlResponse.replace(/\s+/g, '');
  if (!BASE64.test(compact) || compact.length % 4 !== 0)
    throw refused('malformed', 'the SAMLResponse field is not base64');
  const xml = Buffer.from(compact, 'base64').toString('utf8');
  const doc = parseXml(xml);
  if (doc === null)
    throw refused('malformed', 'the response is not one well-formed XML document without a DTD');
  const response = doc.documentElement;
  if (!is(response, NS_SAMLP, 'Response')) throw refused('malformed', 'the document is not a SAML Response');
  const statusCode = child(child(response, NS_SAMLP, 'Status') ?? response, NS_SAMLP, 'StatusCode');
  if (statusCode === undefined) throw refused('malformed', 'the response has no status');
  if (attr(statusCode, 'Value') !== STATUS_SUCCESS)
    throw refused('status', 'the provider answered with an error status');
  if (children(response, NS_SAML, 'EncryptedAssertion').length > 0)
    throw refused('malformed', 'encrypted assertions are not accepted');
  const topAssertions = children(response, NS_SAML, 'Assertion');
  if (topAssertions.length !== 1) throw refused('malformed', 'the response must hold exactly one assertion');
  // Every assertion anywhere in the document: one more (wrapped in Extensions, an Object, ...) is
  // an attempt to make the verified element and the one read differ.
  if (doc.getElementsByTagNameNS(NS_SAML, 'Assertion').length !== 1)
    throw refused('malformed', 'the response holds an assertion outside its place');
  const assertionSignatures = children(topAssertions[0]!, NS_DS, 'Signature');
  if (assertionSignatures.length === 0) throw refused('unsigned', 'the assertion is not signed');
  if (assertionSignatures.length > 1)
    throw refused('bad-signature', 'the assertion carries several signatures');
  checkAlgorithms(assertionSignatures[0]!);
  for (const s of children(response, NS_DS, 'Signature')) checkAlgorithms(s);

  // ---- the signature, audience and time (node-saml), with a tolerance widened by how far `now`
  // is from the system clock; the exact windows are checked below against `now`.
  const saml = samlOf(connection, { acceptedClockSkewMs: skewMs + Math.abs(nowMs - Date.now()) });
  let assertionXml: string;
  try {
    const result = await saml.validatePostResponseAsync({ SAMLResponse: compact });
    const got = result.profile?.getAssertionXml?.();
    if (result.loggedOut || typeof got !== 'string') throw new Error('no assertion');
    assertionXml = got;
  } catch (err) {
    throw mapError(err);
  }

  // ---- everything below is read from the verified assertion only
  const verified = parseXml(assertionXml);
  const assertion = verified?.documentElement;
  if (assertion === undefined || !is(assertion, NS_SAML, 'Assertion'))
    throw refused('malformed', 'the verified content is not an assertion');
  if (attr(assertion, 'ID') !== attr(topAssertions[0]!, 'ID'))
    throw refused('bad-signature', 'the verified assertion is not the one the response holds');

  if (textOf(child(assertion, NS_SAML, 'Issuer')).trim() !== connection.idpEntityId)
    throw refused('wrong-issuer', 'the assertion issuer is not the connection one');
  const responseIssuer = child(response, NS_SAML, 'Issuer');
  if (responseIssuer !== undefined && textOf(responseIssuer).trim() !== connection.idpEntityId)
    throw refused('wrong-issuer', 'the response issuer is not the connection one');

  const destination = attr(response, 'Destination');
  if (destination !== null && destination !== connection.acsUrl)
    throw refused('wrong-recipient', 'the response is addressed to another URL');
  const responseInResponseTo = attr(response, 'InResponseTo');
  if (responseInResponseTo !== null && !sameText(responseInResponseTo, expectedInResponseTo))
    throw refused('in-response-to', 'the response answers another request');

  const issued = instant(attr(assertion, 'IssueInstant'), 'the assertion IssueInstant');
  if (issued === null) throw refused('malformed', 'the assertion has no IssueInstant');
  if (issued - skewMs > nowMs) throw refused('not-yet-valid', 'the assertion was issued in the future');

  const conditions = children(assertion, NS_SAML, 'Conditions');
  if (conditions.length !== 1) throw refused('malformed', 'the assertion must hold one Conditions');
  const notBefore = instant(attr(conditions[0]!, 'NotBefore'), 'Conditions NotBefore');
  const notOnOrAfter = instant(attr(conditions[0]!, 'NotOnOrAfter'), 'Conditions NotOnOrAfter');
  if (notBefore !== null && nowMs + skewMs < notBefore)
    throw refused('not-yet-valid', 'the assertion is not valid yet');
  if (notOnOrAfter !== null && nowMs - skewMs >= notOnOrAfter)
    throw refused('expired', 'the assertion has expired');
  const restrictions = children(conditions[0]!, NS_SAML, 'AudienceRestriction');
  if (
    restrictions.length === 0 ||
    !restrictions.every((r) =>
      children(r, NS_SAML, 'Audience').some((a) => textOf(a).trim() === connection.spEntityId),
    )
  )
    throw refused('wrong-audience', 'the assertion is not for this service');

  const subject = child(assertion, NS_SAML, 'Subject');
  if (subject === undefined) throw refused('malformed', 'the assertion has no subject');
  const bearers = children(subject, NS_SAML, 'SubjectConfirmation').filter(
    (c) => attr(c, 'Method') === BEARER,
  );
  if (bearers.length === 0) throw refused('malformed', 'the assertion has no bearer subject confirmation');
  let firstProblem: IdentityError | null = null;
  let confirmed = false;
  for (const confirmation of bearers) {
    const data = child(confirmation, NS_SAML, 'SubjectConfirmationData');
    let problem: IdentityError | null = null;
    if (data === undefined) problem = refused('malformed', 'a subject confirmation has no data');
    else {
      const until = instant(attr(data, 'NotOnOrAfter'), 'SubjectConfirmationData NotOnOrAfter');
      const from = instant(attr(data, 'NotBefore'), 'SubjectConfirmationData NotBefore');
      const answers = attr(data, 'InResponseTo');
      if (attr(data, 'Recipient') !== connection.acsUrl)
        problem = refused('wrong-recipient', 'the assertion is addressed to another URL');
      else if (answers === null || !sameText(answers, expectedInResponseTo))
        problem = refused('in-response-to', 'the assertion answers another request (or none)');
      else if (until === null) problem = refused('malformed', 'the subject confirmation has no NotOnOrAfter');
      else if (nowMs - skewMs >= until) problem = refused('expired', 'the subject confirmation has expired');
      else if (from !== null && nowMs + skewMs < from)
        problem = refused('not-yet-valid', 'the subject confirmation is not valid yet');
    }
    if (problem === null) {
      confirmed = true;
      break;
    }
    firstProblem ??= problem;
  }
  if (!confirmed) throw firstProblem!;

  const nameIds = children(subject, NS_SAML, 'NameID');
  if (nameIds.length !== 1) throw refused('nameid-format', 'the assertion has no single NameID');
  if (attr(nameIds[0]!, 'Format') !== SAML_NAMEID_PERSISTENT)
    throw refused('nameid-format', 'the NameID is not persistent');
  const nameId = textOf(nameIds[0]).trim();
  if (nameId.length === 0 || nameId.length > 256)
    throw refused('nameid-format', 'the NameID is empty or longer than 256 characters');

  const attributes = attributesOf(assertion);
  const emailNames =
    connection.emailAttribute === undefined ? SAML_DEFAULT_EMAIL_ATTRIBUTES : [connection.emailAttribute];
  const emailName = emailNames.find((n) => valuesOf(attributes, n) !== undefined);
  const emailValues = emailName === undefined ? [] : (valuesOf(attributes, emailName) ?? []);
  if (emailValues.length !== 1) throw refused('email-missing', 'the assertion carries no single email');
  let email: string;
  try {
    email = normaliseEmail(emailValues[0]);
  } catch {
    throw refused('email-missing', 'the assertion carries an email that is not an address');
  }
  const domain = email.slice(email.lastIndexOf('@') + 1);
  if (!connection.allowedEmailDomains.some((d) => d.toLowerCase() === domain))
    throw refused('email-domain', 'the email domain is not allowed on this connection');

  const groups =
    connection.groupsAttribute === undefined
      ? []
      : [
          ...new Set(
            (valuesOf(attributes, connection.groupsAttribute) ?? [])
              .map((g) => g.trim())
              .filter((g) => g !== ''),
          ),
        ];

  let sessionNotOnOrAfter: Date | undefined;
  for (const statement of children(assertion, NS_SAML, 'AuthnStatement')) {
    const until = instant(attr(statement, 'SessionNotOnOrAfter'), 'AuthnStatement SessionNotOnOrAfter');
    if (until !== null && (sessionNotOnOrAfter === undefined || until < sessionNotOnOrAfter.getTime()))
      sessionNotOnOrAfter = new Date(until);
  }

  return {
    subject: samlSubject(connection.id, connection.idpEntityId, nameId),
    email,
    groups,
    entityId: connection.idpEntityId,
    nameId,
    ...(sessionNotOnOrAfter === undefined ? {} : { sessionNotOnOrAfter }),
    attributes,
  };
}
