/**
 * SAML 2.0 sign-in: the service-provider side, on `@node-saml/node-saml` (v5). This file holds the
 * connection (its shape, its checks, the subject it gives) and what the other SAML files share;
 * saml-metadata.ts reads the identity provider's metadata and writes the service provider's,
 * saml-start.ts starts a sign-in and saml-consumer.ts finishes it.
 *
 * The engine keeps connections (the identity provider's entity id, single sign-on URL and signing
 * certificates, allowed email domains, the email and group attributes, and its own entity id and
 * assertion consumer URL) and wires three routes; these modules do the protocol: the identity
 * provider's metadata (parsed without a DTD, or fetched over https with a timeout and a size cap),
 * the service provider's own metadata, the AuthnRequest (HTTP-Redirect binding, persistent NameID)
 * whose ID the engine binds to a single-use RelayState, and the assertion consumer: a signed
 * assertion (the Response's signature alone is not enough), its issuer, audience, recipient,
 * time window with a bounded clock skew and InResponseTo, a persistent NameID, an email in an
 * allowed domain, and the subject `saml:<connection id>:<entity id>#<NameID>` (rule 7: never the
 * email).
 *
 * Every refusal is an IdentityError, ERR_IDENTITY_SAML_REFUSED (or ERR_IDENTITY_SAML_UNAVAILABLE
 * when the provider's metadata cannot be fetched or read) with `refusal` set to a stable reason
 * code. Messages never carry an assertion, a NameID, an attribute value or a certificate.
 */
import { X509Certificate } from 'node:crypto';
import { SAML, ValidateInResponseTo } from '@node-saml/node-saml';
import { IdentityError } from './errors.ts';

/** Tolerated clock difference with the identity provider unless the connection sets it: 120 s. */
export const SAML_DEFAULT_CLOCK_SKEW_SECONDS = 120;
/** The largest clock skew a connection may set: 300 s. */
export const SAML_MAX_CLOCK_SKEW_SECONDS = 300;
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

const CONNECTION_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
const DOMAIN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
const CONTROL = /[\u0000-\u001f\u007f]/;
export const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export const badArgument = (what: string) => new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', what);

/** True for `https:` URLs and `http:` on a loopback host (tests and local providers only). */
function secureOrLoopback(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.has(url.hostname));
}

/** Null when `value` is an https URL (http only on loopback) without fragment or credentials. */
export function endpointProblem(value: unknown): string | null {
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

export function entityIdProblem(value: unknown): boolean {
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
export function certificatePem(value: unknown): string | null {
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

/** A node-saml instance for one call (nothing is cached between calls). */
export function samlOf(
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
    // InResponseTo is bound by the engine (single-use RelayState) and checked by
    // samlAssertionConsumer (saml-consumer.ts).
    validateInResponseTo: ValidateInResponseTo.never,
    acceptedClockSkewMs: extra.acceptedClockSkewMs ?? 0,
    ...(extra.generateUniqueId ? { generateUniqueId: extra.generateUniqueId } : {}),
  });
}
