/**
 * SAML metadata: the identity provider's (parsed without a DTD, or fetched over https with a
 * timeout and a size cap) and the service provider's own, which the owner gives the identity
 * provider.
 */
import { generateServiceProviderMetadata } from '@node-saml/node-saml';
import { IdentityError, type SamlRefusal } from './errors.ts';
import {
  badArgument,
  certificatePem,
  checkSamlConnection,
  endpointProblem,
  entityIdProblem,
  SAML_NAMEID_PERSISTENT,
  type SamlConnection,
} from './saml-connection.ts';
import { attr, children, is, NS_DS, parseXml, textOf } from './saml-xml.ts';

/** The largest identity-provider metadata document read (pasted or fetched): 1 MiB. */
export const SAML_METADATA_MAX_BYTES = 1024 * 1024;
/** A metadata fetch gives up after this unless set: 10 seconds. */
export const SAML_DEFAULT_TIMEOUT_MS = 10_000;

/** What an identity provider's metadata says, as a connection needs it. */
export interface SamlIdpMetadata {
  /** The EntityDescriptor's `entityID`. */
  entityId: string;
  /** The SingleSignOnService with the HTTP-Redirect binding. */
  ssoUrl: string;
  /** The signing certificates (KeyDescriptor `use="signing"` or without `use`), as PEM. */
  certificates: string[];
}

const NS_MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
const PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
const BINDING_REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';

const unavailable = (refusal: SamlRefusal, what: string) =>
  new IdentityError('ERR_IDENTITY_SAML_UNAVAILABLE', `SAML provider unavailable (${refusal}): ${what}`, {
    refusal,
  });

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
