/**
 * A SAML 2.0 identity provider for sign-in tests: the documents it issues (assertions, Responses,
 * metadata) built from templates and signed with xml-crypto (RSA-SHA256, exclusive c14n,
 * enveloped), with options for every variant a refusal test needs; and a small server on
 * 127.0.0.1 that answers an SP-initiated sign-in as a real provider does: its metadata at
 * `/metadata`, and at `GET /sso` (HTTP-Redirect binding) the AuthnRequest decoded and answered
 * with the HTTP-POST binding's auto-submitting form carrying a signed `SAMLResponse` (InResponseTo
 * = the request's ID, Audience = its Issuer, Recipient and Destination = its ACS URL) and the
 * `RelayState`. Imported as `@coffer/testkit/saml` so tests that do not sign in never load it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { DOMParser } from '@xmldom/xmldom';
import { SignedXml } from 'xml-crypto';
import { makeTestPki } from './pki.ts';

export const SAML_NS = {
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
  metadata: 'urn:oasis:names:tc:SAML:2.0:metadata',
} as const;
export const SAML_PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
export const SAML_TRANSIENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';
export const SAML_EMAIL_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
export const SAML_SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const RSA_SHA256 = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256';
const RSA_SHA1 = 'http://www.w3.org/2000/09/xmldsig#rsa-sha1';
const SHA256 = 'http://www.w3.org/2001/04/xmlenc#sha256';
const SHA1 = 'http://www.w3.org/2000/09/xmldsig#sha1';
const EXC_C14N = 'http://www.w3.org/2001/10/xml-exc-c14n#';
const ENVELOPED = 'http://www.w3.org/2000/09/xmldsig#enveloped-signature';
const BINDING = 'urn:oasis:names:tc:SAML:2.0:bindings:';

const iso = (ms: number) => new Date(ms).toISOString();
/** XML-escapes text or an attribute value. */
const esc = (s: string) =>
  s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
/** A fresh SAML ID (`_` + 40 hex). */
export const samlId = () => `_${randomBytes(20).toString('hex')}`;
/** A certificate's base64 DER (the PEM without its armour and line breaks). */
export const pemBody = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
/** A document as the `SAMLResponse` form field carries it. */
export const samlBase64 = (xml: string) => Buffer.from(xml, 'utf8').toString('base64');

// ---- documents ------------------------------------------------------------------------------

export interface SamlAssertionOptions {
  /** The provider's clock (ms); every default time is relative to it. Default now. */
  at?: number;
  issuer: string;
  /** The AudienceRestriction's Audience (the SP entity id). */
  audience: string;
  /** The bearer SubjectConfirmationData's Recipient (the ACS URL). */
  recipient: string;
  /** The confirmation's InResponseTo; null leaves it out (an unsolicited response). */
  inResponseTo: string | null;
  nameId: string;
  /** Default persistent. */
  nameIdFormat?: string;
  /** Default a fresh ID. */
  id?: string;
  issueInstant?: number;
  /** Conditions NotBefore; default `at` - 5 s. */
  notBefore?: number;
  /** Conditions NotOnOrAfter; default `at` + 5 min. */
  notOnOrAfter?: number;
  /** The confirmation's NotOnOrAfter; default `at` + 5 min. */
  confirmationNotOnOrAfter?: number;
  /** AuthnStatement SessionNotOnOrAfter; default `at` + 8 h. */
  sessionNotOnOrAfter?: number;
  /** Default `email`. */
  emailAttribute?: string;
  /** Absent or null: no email attribute. */
  email?: string | null;
  /** Default `groups`. */
  groupsAttribute?: string;
  /** Absent or null: no groups attribute (repeated values are kept as given). */
  groups?: string[] | null;
  /** More attributes, by name. */
  attributes?: Record<string, string[]>;
}

/** An assertion as an identity provider issues it (unsigned; see signSamlXml). */
export function samlAssertionXml(o: SamlAssertionOptions): string {
  const at = o.at ?? Date.now();
  const attribute = (name: string, values: string[]) =>
    `<saml:Attribute Name="${esc(name)}">${values
      .map((v) => `<saml:AttributeValue>${esc(v)}</saml:AttributeValue>`)
      .join('')}</saml:Attribute>`;
  const attrs: string[] = [];
  if (o.email !== undefined && o.email !== null)
    attrs.push(attribute(o.emailAttribute ?? 'email', [o.email]));
  if (o.groups !== undefined && o.groups !== null)
    attrs.push(attribute(o.groupsAttribute ?? 'groups', o.groups));
  for (const [name, values] of Object.entries(o.attributes ?? {})) attrs.push(attribute(name, values));
  const irt = o.inResponseTo === null ? '' : `InResponseTo="${esc(o.inResponseTo)}" `;
  return [
    `<saml:Assertion xmlns:saml="${SAML_NS.assertion}" ID="${esc(o.id ?? samlId())}" Version="2.0" IssueInstant="${iso(o.issueInstant ?? at)}">`,
    `<saml:Issuer>${esc(o.issuer)}</saml:Issuer>`,
    '<saml:Subject>',
    `<saml:NameID Format="${esc(o.nameIdFormat ?? SAML_PERSISTENT)}">${esc(o.nameId)}</saml:NameID>`,
    '<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">',
    `<saml:SubjectConfirmationData ${irt}NotOnOrAfter="${iso(o.confirmationNotOnOrAfter ?? at + 5 * 60_000)}" Recipient="${esc(o.recipient)}"/>`,
    '</saml:SubjectConfirmation>',
    '</saml:Subject>',
    `<saml:Conditions NotBefore="${iso(o.notBefore ?? at - 5_000)}" NotOnOrAfter="${iso(o.notOnOrAfter ?? at + 5 * 60_000)}">`,
    `<saml:AudienceRestriction><saml:Audience>${esc(o.audience)}</saml:Audience></saml:AudienceRestriction>`,
    '</saml:Conditions>',
    `<saml:AuthnStatement AuthnInstant="${iso(at)}" SessionIndex="_s1" SessionNotOnOrAfter="${iso(o.sessionNotOnOrAfter ?? at + 8 * 3600_000)}">`,
    '<saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext>',
    '</saml:AuthnStatement>',
    `<saml:AttributeStatement>${attrs.join('')}</saml:AttributeStatement>`,
    '</saml:Assertion>',
  ].join('');
}

export interface SamlSigningKey {
  /** PEM private key. */
  key: string;
  /** PEM certificate (sent along in KeyInfo, as providers do). */
  cert: string;
}

/**
 * Signs the document's root element (an Assertion or a Response), the signature enveloped right
 * after its Issuer: RSA-SHA256 and SHA-256, or RSA-SHA1 and SHA-1 with `weak`.
 */
export function signSamlXml(xml: string, signer: SamlSigningKey & { weak?: boolean }): string {
  const sig = new SignedXml({
    privateKey: signer.key,
    publicCert: signer.cert,
    signatureAlgorithm: signer.weak ? RSA_SHA1 : RSA_SHA256,
    canonicalizationAlgorithm: EXC_C14N,
  });
  sig.addReference({
    xpath: '/*',
    transforms: [ENVELOPED, EXC_C14N],
    digestAlgorithm: signer.weak ? SHA1 : SHA256,
  });
  sig.computeSignature(xml, { location: { reference: "/*/*[local-name(.)='Issuer']", action: 'after' } });
  return sig.getSignedXml();
}

export interface SamlResponseOptions {
  issuer: string;
  /** The Response's Destination (the ACS URL); null leaves it out. */
  destination: string | null;
  /** The Response's InResponseTo; null leaves it out. */
  inResponseTo: string | null;
  /** What goes inside after the Status: the (signed) assertion, or anything a test wants. */
  body: string;
  /** Default Success. */
  status?: string;
  /** Default a fresh ID. */
  id?: string;
  issueInstant?: number;
  /** Signs the Response itself too (the assertion keeps its own signature). */
  signWith?: SamlSigningKey;
}

export function samlResponseXml(o: SamlResponseOptions): string {
  const xml = [
    `<samlp:Response xmlns:samlp="${SAML_NS.protocol}" xmlns:saml="${SAML_NS.assertion}"`,
    ` ID="${esc(o.id ?? samlId())}" Version="2.0" IssueInstant="${iso(o.issueInstant ?? Date.now())}"`,
    o.destination === null ? '' : ` Destination="${esc(o.destination)}"`,
    o.inResponseTo === null ? '' : ` InResponseTo="${esc(o.inResponseTo)}"`,
    '>',
    `<saml:Issuer>${esc(o.issuer)}</saml:Issuer>`,
    `<samlp:Status><samlp:StatusCode Value="${esc(o.status ?? SAML_SUCCESS)}"/></samlp:Status>`,
    o.body,
    '</samlp:Response>',
  ].join('');
  return o.signWith ? signSamlXml(xml, o.signWith) : xml;
}

export interface SamlIdpMetadataOptions {
  entityId: string;
  /** The SingleSignOnService location (the HTTP-POST one, when listed, gets `/post` appended). */
  ssoUrl: string;
  /** Signing certificates (PEM or base64 DER). */
  certificates: string[];
  /** Certificates listed with use="encryption". */
  encryptionCertificates?: string[];
  /** Binding names; default HTTP-POST and HTTP-Redirect. */
  bindings?: string[];
}

/** An IdP's EntityDescriptor, as a provider publishes it (unsigned). */
export function samlIdpMetadataXml(o: SamlIdpMetadataOptions): string {
  const key = (cert: string, use: string) =>
    `<md:KeyDescriptor use="${use}"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>\n${pemBody(cert).replace(/(.{64})/g, '$1\n')}\n</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`;
  const services = (o.bindings ?? ['HTTP-POST', 'HTTP-Redirect'])
    .map(
      (b) =>
        `<md:SingleSignOnService Binding="${BINDING}${b}" Location="${esc(o.ssoUrl)}${b === 'HTTP-POST' ? '/post' : ''}"/>`,
    )
    .join('');
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<md:EntityDescriptor xmlns:md="${SAML_NS.metadata}" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${esc(o.entityId)}">`,
    `<md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="${SAML_NS.protocol}">`,
    ...o.certificates.map((c) => key(c, 'signing')),
    ...(o.encryptionCertificates ?? []).map((c) => key(c, 'encryption')),
    `<md:NameIDFormat>${SAML_PERSISTENT}</md:NameIDFormat>`,
    services,
    '</md:IDPSSODescriptor>',
    '</md:EntityDescriptor>',
  ].join('\n');
}

// ---- reading what a service provider sends -----------------------------------------------------

export interface SamlAuthnRequest {
  id: string;
  issuer: string | null;
  acsUrl: string | null;
  destination: string | null;
  nameIdFormat: string | null;
  relayState: string | null;
  /** The request's XML, inflated. */
  xml: string;
}

/** Decodes an HTTP-Redirect binding URL's `SAMLRequest` (base64 of raw deflate) and RelayState. */
export function decodeSamlRedirect(url: string | URL): SamlAuthnRequest {
  const u = new URL(url);
  const encoded = u.searchParams.get('SAMLRequest');
  if (encoded === null) throw new Error('no SAMLRequest');
  const xml = inflateRawSync(Buffer.from(encoded, 'base64')).toString('utf8');
  const root = new DOMParser().parseFromString(xml, 'text/xml').documentElement;
  if (root?.localName !== 'AuthnRequest' || root.namespaceURI !== SAML_NS.protocol)
    throw new Error('not an AuthnRequest');
  const id = root.getAttribute('ID');
  if (!id) throw new Error('AuthnRequest without ID');
  return {
    id,
    issuer: root.getElementsByTagNameNS(SAML_NS.assertion, 'Issuer')[0]?.textContent?.trim() ?? null,
    acsUrl: root.getAttribute('AssertionConsumerServiceURL') || null,
    destination: root.getAttribute('Destination') || null,
    nameIdFormat:
      root.getElementsByTagNameNS(SAML_NS.protocol, 'NameIDPolicy')[0]?.getAttribute('Format') || null,
    relayState: u.searchParams.get('RelayState'),
    xml,
  };
}

/** The HTTP-POST binding's auto-submitting page: its form's action and hidden fields. */
export function readAutoPostForm(html: string): { action: string; fields: URLSearchParams } {
  const form = /<form[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (form === null) throw new Error('no form on the page');
  const unesc = (s: string) =>
    s.replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
  const fields = new URLSearchParams();
  for (const input of form[2]!.matchAll(/<input[^>]*>/gi)) {
    const name = /\bname="([^"]*)"/.exec(input[0])?.[1];
    if (name === undefined) continue;
    fields.set(unesc(name), unesc(/\bvalue="([^"]*)"/.exec(input[0])?.[1] ?? ''));
  }
  return { action: unesc(form[1]!), fields };
}

// ---- the provider ---------------------------------------------------------------------------

export interface TestSamlUser {
  /** The persistent NameID (or whatever `nameIdFormat` says). */
  nameId: string;
  email?: string;
  groups?: string[];
  /** Default persistent. */
  nameIdFormat?: string;
}

/** How one answer departs from a proper one (for refusal tests). */
export interface TestSamlAnswerOptions {
  /** The user to sign in; default the `login` query parameter, else `nextLogin`. */
  login?: string;
  /** No signature on the assertion. */
  unsigned?: boolean;
  /** Sign with this key instead of the provider's own (its certificate goes in KeyInfo). */
  signWith?: SamlSigningKey;
  /** SHA-1 signature and digest. */
  weak?: boolean;
  /** Also sign the Response. */
  signResponse?: boolean;
  /** Overrides of the assertion's fields. */
  assertion?: Partial<SamlAssertionOptions>;
  /** Overrides of the Response's fields. */
  response?: Partial<Omit<SamlResponseOptions, 'body' | 'signWith'>>;
}

export interface TestSamlIdpOptions {
  users: Record<string, TestSamlUser>;
  /** Default `<base>/metadata`. */
  entityId?: string;
  /** The signing key; default a fresh RSA key and self-issued certificate made with openssl. */
  signing?: SamlSigningKey;
  /** Attribute names; default `email` and `groups`. */
  emailAttribute?: string;
  groupsAttribute?: string;
  /** The login used when the request names none. */
  nextLogin?: string;
}

export interface TestSamlAnswer {
  /** Where the form posts: the AuthnRequest's AssertionConsumerServiceURL. */
  acsUrl: string;
  samlResponse: string;
  relayState: string | null;
  /** The Response XML (signed as asked). */
  xml: string;
  request: SamlAuthnRequest;
  /** The auto-submitting HTML page. */
  html: string;
}

export interface TestSamlIdp {
  /** `http://127.0.0.1:<port>` */
  url: string;
  entityId: string;
  metadataUrl: string;
  /** The HTTP-Redirect SingleSignOnService. */
  ssoUrl: string;
  /** The metadata document `/metadata` serves. */
  metadataXml: string;
  signing: SamlSigningKey;
  /** The login used when `/sso` is asked without `login`. */
  nextLogin: string | undefined;
  /** When false, `/metadata` answers 503 (the provider's metadata endpoint down). */
  serveMetadata: boolean;
  /** Every AuthnRequest `/sso` received, in order. */
  readonly requests: SamlAuthnRequest[];
  /** How many times `/metadata` was asked. */
  metadataReads: number;
  /** Overrides applied to the next `/sso` answer only. */
  answerNext(options: TestSamlAnswerOptions): void;
  /** The answer to an HTTP-Redirect sign-in URL, built without HTTP (what `/sso` sends). */
  answer(redirectUrl: string | URL, options?: TestSamlAnswerOptions): TestSamlAnswer;
  server: Server;
  close(): Promise<void>;
}

function freshSigningKey(): SamlSigningKey {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-saml-idp-'));
  try {
    const pki = makeTestPki(dir, { caName: 'coffer test saml idp' });
    return { key: pki.key, cert: pki.cert };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts a provider on an ephemeral loopback port. */
export async function startTestSamlIdp(options: TestSamlIdpOptions): Promise<TestSamlIdp> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const url = `http://127.0.0.1:${address.port}`;
  const entityId = options.entityId ?? `${url}/metadata`;
  const signing = options.signing ?? freshSigningKey();
  const ssoUrl = `${url}/sso`;
  const metadataXml = samlIdpMetadataXml({ entityId, ssoUrl, certificates: [signing.cert] });
  let next: TestSamlAnswerOptions | null = null;

  const idp: TestSamlIdp = {
    url,
    entityId,
    metadataUrl: `${url}/metadata`,
    ssoUrl,
    metadataXml,
    signing,
    nextLogin: options.nextLogin,
    serveMetadata: true,
    requests: [],
    metadataReads: 0,
    server,
    answerNext(o) {
      next = o;
    },
    answer(redirectUrl, o = {}) {
      const request = decodeSamlRedirect(redirectUrl);
      const login = o.login ?? new URL(redirectUrl).searchParams.get('login') ?? idp.nextLogin;
      const user = login === undefined ? undefined : options.users[login];
      if (user === undefined) throw new Error(`no such user: ${login ?? '(none named)'}`);
      if (request.acsUrl === null || request.issuer === null)
        throw new Error('the AuthnRequest names no ACS URL or no issuer');
      const at = Date.now();
      const unsignedAssertion = samlAssertionXml({
        at,
        issuer: entityId,
        audience: request.issuer,
        recipient: request.acsUrl,
        inResponseTo: request.id,
        nameId: user.nameId,
        nameIdFormat: user.nameIdFormat ?? SAML_PERSISTENT,
        ...(user.email !== undefined ? { email: user.email } : {}),
        ...(user.groups !== undefined ? { groups: user.groups } : {}),
        ...(options.emailAttribute !== undefined ? { emailAttribute: options.emailAttribute } : {}),
        ...(options.groupsAttribute !== undefined ? { groupsAttribute: options.groupsAttribute } : {}),
        ...o.assertion,
      });
      const assertion = o.unsigned
        ? unsignedAssertion
        : signSamlXml(unsignedAssertion, { ...(o.signWith ?? signing), weak: o.weak ?? false });
      const xml = samlResponseXml({
        issuer: entityId,
        destination: request.acsUrl,
        inResponseTo: request.id,
        issueInstant: at,
        ...o.response,
        body: assertion,
        ...(o.signResponse ? { signWith: signing } : {}),
      });
      const samlResponse = samlBase64(xml);
      const fields = [
        `<input type="hidden" name="SAMLResponse" value="${esc(samlResponse)}"/>`,
        request.relayState === null
          ? ''
          : `<input type="hidden" name="RelayState" value="${esc(request.relayState)}"/>`,
      ].join('');
      const html = [
        '<!doctype html><html><head><title>Signing in</title></head>',
        '<body onload="document.forms[0].submit()">',
        `<form method="post" action="${esc(request.acsUrl)}">${fields}`,
        '<noscript><button type="submit">Continue</button></noscript></form>',
        '</body></html>',
      ].join('');
      return { acsUrl: request.acsUrl, samlResponse, relayState: request.relayState, xml, request, html };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  server.on('request', (req, res) => {
    const u = new URL(req.url ?? '/', url);
    if (req.method === 'GET' && u.pathname === '/metadata') {
      idp.metadataReads++;
      if (!idp.serveMetadata) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('metadata temporarily unavailable');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/samlmetadata+xml' }).end(metadataXml);
      return;
    }
    if (req.method === 'GET' && u.pathname === '/sso') {
      const o = next ?? {};
      next = null;
      let answer: TestSamlAnswer;
      try {
        idp.requests.push(decodeSamlRedirect(u));
        answer = idp.answer(u, o);
      } catch (err) {
        res
          .writeHead(400, { 'content-type': 'text/plain' })
          .end(`bad sign-in request: ${(err as Error).message}`);
        return;
      }
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
        .end(answer.html);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });

  return idp;
}
