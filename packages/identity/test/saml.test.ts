// SAML sign-in against a real signing identity provider: assertions built by @coffer/testkit/saml
// and signed with xml-crypto (RSA-SHA256, exclusive c14n, enveloped) under a test certificate made
// with openssl, answering the AuthnRequest samlStart built (SP-initiated: its ID is the
// InResponseTo). The happy path (subject, email, groups, a key rollover), every refusal with its
// reason code (unsigned, another key, tampered, SHA-1, wrong issuer, audience, recipient,
// destination, expired and the clock-skew bound, not yet valid, another or no InResponseTo,
// transient and email NameIDs, no or a foreign email, an error status), four XML signature
// wrapping variants, the metadata both ways (parsed, with a DTD refused; fetched from a loopback
// server) and the service provider's own metadata.
import { createServer, type Server } from 'node:http';
import { inflateRawSync } from 'node:zlib';
import { makeTestPki, tempDir } from '@coffer/testkit';
import {
  pemBody,
  SAML_EMAIL_FORMAT,
  SAML_TRANSIENT,
  type SamlAssertionOptions,
  samlAssertionXml,
  samlBase64,
  samlIdpMetadataXml,
  samlResponseXml,
  signSamlXml,
} from '@coffer/testkit/saml';
import { DOMParser } from '@xmldom/xmldom';
import t from 'tap';
import {
  checkSamlConnection,
  fetchIdpMetadata,
  isIdentityError,
  parseIdpMetadata,
  SAML_NAMEID_PERSISTENT,
  type SamlConnection,
  samlAssertionConsumer,
  samlCertificateFingerprint,
  samlServiceProviderMetadata,
  samlStart,
  samlSubject,
} from '../src/index.ts';

const IDP_ENTITY = 'https://idp.example.org/saml/metadata';
const SP_ENTITY = 'https://backup.example.org/admin/saml/metadata/acme';
const ACS = 'https://backup.example.org/admin/saml/acs/acme';
const SSO = 'https://idp.example.org/saml/sso';
const NAME_ID = 'c0ffee-ada-0001-persistent';

// The identity provider's key and certificate, a second one (rollover), and an attacker's.
const idp = makeTestPki(tempDir(t), { caName: 'idp' });
const rollover = makeTestPki(tempDir(t), { caName: 'idp rollover' });
const attacker = makeTestPki(tempDir(t), { caName: 'attacker' });

function connection(extra: Partial<SamlConnection> = {}): SamlConnection {
  return {
    id: 'acme',
    idpEntityId: IDP_ENTITY,
    idpSsoUrl: SSO,
    idpCertificates: [idp.cert],
    allowedEmailDomains: ['example.org'],
    groupsAttribute: 'groups',
    spEntityId: SP_ENTITY,
    acsUrl: ACS,
    ...extra,
  };
}

// ---- the test identity provider (documents from @coffer/testkit/saml, this test's defaults) ---

interface AssertionOptions extends Partial<Omit<SamlAssertionOptions, 'inResponseTo'>> {
  inResponseTo?: string | null;
}

/** An assertion as an identity provider issues it, `at` being the provider's clock. */
const assertionXml = (at: number, inResponseTo: string, o: AssertionOptions = {}) =>
  samlAssertionXml({
    at,
    id: '_a1',
    issuer: IDP_ENTITY,
    audience: SP_ENTITY,
    recipient: ACS,
    nameId: NAME_ID,
    email: 'Ada@Example.org',
    groups: ['staff', 'backup-admins', 'staff'],
    ...o,
    inResponseTo: o.inResponseTo === undefined ? inResponseTo : o.inResponseTo,
  });

/** Signs the document's root (an Assertion or a Response) enveloped, after its Issuer. */
const sign = (xml: string, key = idp.key, cert = idp.cert, weak = false) =>
  signSamlXml(xml, { key, cert, weak });

interface ResponseOptions {
  destination?: string | null;
  inResponseTo?: string | null;
  issuer?: string;
  status?: string;
  /** Replaces the assertion(s) inside the Response. */
  body?: string;
  signResponse?: boolean;
}

const responseXml = (inResponseTo: string, assertion: string, o: ResponseOptions = {}) =>
  samlResponseXml({
    id: '_r1',
    issuer: o.issuer ?? IDP_ENTITY,
    destination: o.destination === undefined ? ACS : o.destination,
    inResponseTo: o.inResponseTo === undefined ? inResponseTo : o.inResponseTo,
    body: o.body ?? assertion,
    ...(o.status !== undefined ? { status: o.status } : {}),
    ...(o.signResponse ? { signWith: idp } : {}),
  });

const b64 = samlBase64;

/** SP-initiated: samlStart's request ID, as the engine would find it bound to the RelayState. */
async function requestId(conn = connection()): Promise<string> {
  return (await samlStart(conn, { relayState: 'relay-0123456789' })).requestId;
}

/** A signed response for a fresh request, `at` being the IdP's clock. */
async function signedResponse(
  o: AssertionOptions & ResponseOptions & { at?: number; key?: string; cert?: string; weak?: boolean } = {},
) {
  const id = await requestId();
  const at = o.at ?? Date.now();
  const assertion = sign(assertionXml(at, id, o), o.key, o.cert, o.weak);
  return { id, samlResponse: b64(responseXml(id, assertion, o)), assertion };
}

/** The reason code of a SAML refusal, checking that the message carries no NameID, email or key. */
async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    if (
      !isIdentityError(e, 'ERR_IDENTITY_SAML_REFUSED') &&
      !isIdentityError(e, 'ERR_IDENTITY_SAML_UNAVAILABLE')
    )
      throw e;
    for (const s of [
      NAME_ID,
      'ada@example.org',
      'Ada@Example.org',
      pemBody(idp.cert).slice(0, 40),
      'Assertion>',
    ])
      if (e.message.includes(s)) t.fail(`message carries a value: ${e.message}`);
    return `${e.code === 'ERR_IDENTITY_SAML_UNAVAILABLE' ? 'unavailable:' : ''}${e.refusal ?? 'none'}`;
  }
}

const consume = (
  samlResponse: string,
  expectedInResponseTo: string,
  extra: Partial<{ now: Date; conn: SamlConnection }> = {},
) =>
  samlAssertionConsumer(extra.conn ?? connection(), {
    samlResponse,
    expectedInResponseTo,
    ...(extra.now ? { now: extra.now } : {}),
  });

// ---- tests ----------------------------------------------------------------------------------

t.test('samlStart: an HTTP-Redirect AuthnRequest asking for a persistent NameID', async (t) => {
  const { redirectUrl, requestId: id } = await samlStart(connection(), { relayState: 'relay-0123456789' });
  const url = new URL(redirectUrl);
  t.equal(`${url.origin}${url.pathname}`, SSO);
  t.equal(url.searchParams.get('RelayState'), 'relay-0123456789');
  t.notOk(url.searchParams.has('Signature'), 'requests are not signed');
  t.match(id, /^_[0-9a-f]{40}$/);
  const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLRequest')!, 'base64')).toString('utf8');
  const req = new DOMParser().parseFromString(xml, 'text/xml').documentElement!;
  t.equal(req.localName, 'AuthnRequest');
  t.equal(req.getAttribute('ID'), id);
  t.equal(req.getAttribute('Destination'), SSO);
  t.equal(req.getAttribute('AssertionConsumerServiceURL'), ACS);
  t.equal(req.getAttribute('ProtocolBinding'), 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST');
  t.equal(
    req.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'Issuer')[0]?.textContent,
    SP_ENTITY,
  );
  const policy = req.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:protocol', 'NameIDPolicy')[0];
  t.equal(policy?.getAttribute('Format'), SAML_NAMEID_PERSISTENT);
  t.equal(policy?.getAttribute('AllowCreate'), 'true');
  t.equal(
    req.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:protocol', 'RequestedAuthnContext').length,
    0,
  );
  const other = await samlStart(connection(), { relayState: 'relay-0123456789' });
  t.not(other.requestId, id, 'a fresh ID each time');
  for (const relayState of ['', 'a'.repeat(81), 'has space', 'x"y', 'ü'])
    await t.rejects(samlStart(connection(), { relayState }), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
});

t.test('the happy path: subject from connection, entity id and NameID; email; groups', async (t) => {
  const { id, samlResponse } = await signedResponse();
  const identity = await consume(samlResponse, id);
  t.equal(identity.subject, `saml:acme:${IDP_ENTITY}#${NAME_ID}`);
  t.equal(identity.subject, samlSubject('acme', IDP_ENTITY, NAME_ID));
  t.notMatch(identity.subject, /@/, 'the subject never holds the email');
  t.equal(identity.email, 'ada@example.org', 'normalised');
  t.same(identity.groups, ['staff', 'backup-admins'], 'multi-valued, duplicates dropped');
  t.equal(identity.entityId, IDP_ENTITY);
  t.equal(identity.nameId, NAME_ID);
  t.ok(identity.sessionNotOnOrAfter instanceof Date);
  t.ok(identity.sessionNotOnOrAfter!.getTime() > Date.now() + 7 * 3600_000);
  t.same(identity.attributes.email, ['Ada@Example.org']);

  // No group attribute configured: no groups read.
  const again = await signedResponse();
  t.same(
    (await consume(again.samlResponse, again.id, { conn: connection({ groupsAttribute: undefined }) }))
      .groups,
    [],
  );

  // A signed Response around the signed assertion is fine too.
  const both = await signedResponse({ signResponse: true });
  t.equal((await consume(both.samlResponse, both.id)).nameId, NAME_ID);

  // Key rollover: either listed certificate verifies; base64 DER as metadata carries it works too.
  const rolled = await signedResponse({ key: rollover.key, cert: rollover.cert });
  const conn = connection({ idpCertificates: [pemBody(idp.cert), rollover.cert] });
  t.equal((await consume(rolled.samlResponse, rolled.id, { conn })).nameId, NAME_ID);

  // The claims-URI email attribute, found without configuration; a configured one is exact.
  const claims = await signedResponse({
    emailAttribute: 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
  });
  t.equal((await consume(claims.samlResponse, claims.id)).email, 'ada@example.org');
  const custom = await signedResponse({ emailAttribute: 'workMail' });
  t.equal(await reason(consume(custom.samlResponse, custom.id)), 'email-missing');
  const customConn = connection({ emailAttribute: 'workMail' });
  t.equal((await consume(custom.samlResponse, custom.id, { conn: customConn })).email, 'ada@example.org');
});

t.test('the signature: unsigned, another key, tampered, SHA-1, a signed Response alone', async (t) => {
  const id = await requestId();
  const at = Date.now();
  t.equal(
    await reason(consume(b64(responseXml(id, assertionXml(at, id))), id)),
    'unsigned',
    'unsigned assertion',
  );
  t.equal(
    await reason(consume(b64(responseXml(id, assertionXml(at, id), { signResponse: true })), id)),
    'unsigned',
    'a signed Response with an unsigned assertion',
  );
  const foreign = await signedResponse({ key: attacker.key, cert: attacker.cert });
  t.equal(await reason(consume(foreign.samlResponse, foreign.id)), 'bad-signature', 'signed by another key');
  // The same assertion, its email changed after signing.
  const good = await signedResponse();
  const tampered = Buffer.from(good.samlResponse, 'base64')
    .toString('utf8')
    .replace('Ada@Example.org', 'eve@example.org');
  t.equal(await reason(consume(b64(tampered), good.id)), 'bad-signature', 'tampered after signing');
  const weak = await signedResponse({ weak: true });
  t.equal(await reason(consume(weak.samlResponse, weak.id)), 'weak-algorithm', 'SHA-1');
  // The certificate in the signature's KeyInfo is never trusted: only the connection's are.
  t.match(foreign.assertion, /X509Certificate/, 'the attacker sent its certificate along');
});

t.test('issuer, audience, recipient and destination', async (t) => {
  const issuer = await signedResponse({ issuer: 'https://evil.example/idp' });
  t.equal(await reason(consume(issuer.samlResponse, issuer.id)), 'wrong-issuer');
  const responseIssuer = await signedResponse({});
  const swapped = Buffer.from(responseIssuer.samlResponse, 'base64')
    .toString('utf8')
    .replace(
      `<saml:Issuer>${IDP_ENTITY}</saml:Issuer><samlp:Status>`,
      '<saml:Issuer>https://evil.example/idp</saml:Issuer><samlp:Status>',
    );
  t.equal(
    await reason(consume(b64(swapped), responseIssuer.id)),
    'wrong-issuer',
    'the Response names another',
  );
  const audience = await signedResponse({ audience: 'https://other-sp.example.org/metadata' });
  t.equal(await reason(consume(audience.samlResponse, audience.id)), 'wrong-audience');
  const recipient = await signedResponse({ recipient: 'https://other-sp.example.org/acs' });
  t.equal(await reason(consume(recipient.samlResponse, recipient.id)), 'wrong-recipient');
  const destination = await signedResponse({ destination: 'https://other-sp.example.org/acs' });
  t.equal(await reason(consume(destination.samlResponse, destination.id)), 'wrong-recipient');
  const noDestination = await signedResponse({ destination: null });
  t.equal(
    await reason(consume(noDestination.samlResponse, noDestination.id)),
    'accepted',
    'Destination is optional',
  );
});

t.test('time: expired, not yet valid, and the clock-skew bound', async (t) => {
  const at = Date.now();
  const { id, samlResponse } = await signedResponse({ at });
  // The assertion lives five minutes from `at`; the default skew is 120 s.
  const after = (s: number) => new Date(at + 5 * 60_000 + s * 1000);
  t.equal(await reason(consume(samlResponse, id, { now: after(100) })), 'accepted', 'within the skew');
  t.equal(await reason(consume(samlResponse, id, { now: after(130) })), 'expired', 'beyond the skew');
  t.equal(
    await reason(consume(samlResponse, id, { now: after(-60 * 60) })),
    'not-yet-valid',
    'an hour early',
  );
  const wide = connection({ clockSkewSeconds: 300 });
  t.equal(await reason(consume(samlResponse, id, { now: after(250), conn: wide })), 'accepted', 'skew 300 s');
  t.equal(
    await reason(consume(samlResponse, id, { now: after(310), conn: wide })),
    'expired',
    'never beyond 300 s',
  );
  t.throws(() => checkSamlConnection(connection({ clockSkewSeconds: 301 })), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
    message: /clockSkewSeconds/,
  });
  const none = connection({ clockSkewSeconds: 0 });
  t.equal(await reason(consume(samlResponse, id, { now: after(1), conn: none })), 'expired', 'skew 0');

  // The subject confirmation's window alone, and an assertion the system clock finds expired.
  const short = await signedResponse({ confirmationNotOnOrAfter: Date.now() - 10 * 60_000 });
  t.equal(await reason(consume(short.samlResponse, short.id)), 'expired');
  const old = await signedResponse({ at: Date.now() - 60 * 60_000 });
  t.equal(await reason(consume(old.samlResponse, old.id)), 'expired');
  const future = await signedResponse({ at: Date.now() + 60 * 60_000 });
  t.equal(await reason(consume(future.samlResponse, future.id)), 'not-yet-valid');
});

t.test('InResponseTo: another request, none (IdP-initiated), a replay against another ID', async (t) => {
  const { id, samlResponse } = await signedResponse();
  const other = await requestId();
  t.equal(await reason(consume(samlResponse, other)), 'in-response-to', 'bound to another request');
  const none = await signedResponse({ inResponseTo: null });
  t.equal(await reason(consume(none.samlResponse, none.id)), 'in-response-to', 'unsolicited');
  // The envelope's InResponseTo differing from the signed one is refused as well.
  const mixed = await signedResponse();
  const xml = Buffer.from(mixed.samlResponse, 'base64').toString('utf8');
  const relabelled = xml.replace(`InResponseTo="${mixed.id}">`, `InResponseTo="${other}">`);
  t.not(relabelled, xml);
  t.equal(await reason(consume(b64(relabelled), mixed.id)), 'in-response-to');
  // The first use is accepted; the engine's single-use RelayState stops a second use of that ID.
  t.equal(await reason(consume(samlResponse, id)), 'accepted');
  await t.rejects(consume(samlResponse, ''), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
});

t.test('NameID: only persistent; email: present, an address, an allowed domain', async (t) => {
  const transient = await signedResponse({ nameIdFormat: SAML_TRANSIENT });
  t.equal(await reason(consume(transient.samlResponse, transient.id)), 'nameid-format', 'transient');
  const email = await signedResponse({ nameIdFormat: SAML_EMAIL_FORMAT, nameId: 'ada@example.org' });
  t.equal(await reason(consume(email.samlResponse, email.id)), 'nameid-format', 'emailAddress');
  const long = await signedResponse({ nameId: 'x'.repeat(257) });
  t.equal(await reason(consume(long.samlResponse, long.id)), 'nameid-format', 'longer than 256');
  const missing = await signedResponse({ email: null });
  t.equal(await reason(consume(missing.samlResponse, missing.id)), 'email-missing');
  const junk = await signedResponse({ email: 'not-an-address' });
  t.equal(await reason(consume(junk.samlResponse, junk.id)), 'email-missing');
  const foreign = await signedResponse({ email: 'eve@evil.example' });
  t.equal(await reason(consume(foreign.samlResponse, foreign.id)), 'email-domain');
  const sub = await signedResponse({ email: 'sue@sub.example.org' });
  t.equal(await reason(consume(sub.samlResponse, sub.id)), 'email-domain', 'no subdomains');
});

t.test('the document: status, size, base64, DTD, encrypted, foreign root', async (t) => {
  const id = await requestId();
  const denied = responseXml(id, '', { status: 'urn:oasis:names:tc:SAML:2.0:status:Requester' });
  t.equal(await reason(consume(b64(denied), id)), 'status');
  t.equal(await reason(consume('A'.repeat(256 * 1024 + 4), id)), 'malformed', 'over 256 KiB');
  t.equal(await reason(consume('not base64!', id)), 'malformed');
  t.equal(await reason(consume(b64('<nope'), id)), 'malformed');
  const good = await signedResponse();
  const xml = Buffer.from(good.samlResponse, 'base64').toString('utf8');
  const dtd = `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>${xml}`;
  t.equal(await reason(consume(b64(dtd), good.id)), 'malformed', 'a DTD');
  const encrypted = responseXml(id, '<saml:EncryptedAssertion/>');
  t.equal(await reason(consume(b64(encrypted), id)), 'malformed', 'encrypted assertions');
  t.equal(await reason(consume(b64(good.assertion), good.id)), 'malformed', 'a bare assertion');
  const empty = responseXml(id, '');
  t.equal(await reason(consume(b64(empty), id)), 'malformed', 'no assertion');
});

t.test('XML signature wrapping: every variant is refused', async (t) => {
  const id = await requestId();
  const at = Date.now();
  const signed = sign(assertionXml(at, id));
  const evil = assertionXml(at, id, { id: '_evil', nameId: 'eve-0666', email: 'eve@example.org' });

  // 1. A second, unsigned assertion before the signed one.
  const first = responseXml(id, '', { body: evil + signed });
  t.equal(await reason(consume(b64(first), id)), 'malformed', 'an injected assertion before the signed one');

  // 2. The signed assertion moved into the Response's Extensions, an evil one in its place.
  const wrapped = responseXml(id, '', { body: `<samlp:Extensions>${signed}</samlp:Extensions>${evil}` });
  t.equal(await reason(consume(b64(wrapped), id)), 'malformed', 'the signed assertion wrapped in Extensions');

  // 3. The evil assertion at the top, carrying the signature, the signed one inside a ds:Object.
  const signature = /<Signature[\s\S]*<\/Signature>/.exec(signed)![0];
  const withObject = signature.replace(
    '</Signature>',
    `<Object>${signed.replace(signature, '')}</Object></Signature>`,
  );
  const inObject = evil.replace('</saml:Issuer>', `</saml:Issuer>${withObject}`);
  t.equal(
    await reason(consume(b64(responseXml(id, inObject)), id)),
    'malformed',
    'the signed one in a ds:Object',
  );

  // 4. Only the evil assertion, with the signed one's ID and signature: one assertion in the
  //    document, so it reaches the signature check, which finds the digest does not match.
  const impostor = assertionXml(at, id, { id: '_a1', nameId: 'eve-0666', email: 'eve@example.org' }).replace(
    '</saml:Issuer>',
    `</saml:Issuer>${signature}`,
  );
  t.equal(await reason(consume(b64(responseXml(id, impostor)), id)), 'bad-signature', 'a copied signature');

  // The genuine response still signs in, as Ada.
  t.equal((await consume(b64(responseXml(id, signed)), id)).nameId, NAME_ID);
});

// ---- connections and metadata ----------------------------------------------------------------

t.test('checkSamlConnection names the field, never the value', async (t) => {
  t.doesNotThrow(() => checkSamlConnection(connection()));
  t.doesNotThrow(() => checkSamlConnection(connection({ idpSsoUrl: 'http://127.0.0.1:8080/sso' })));
  const cases: [Partial<SamlConnection>, RegExp][] = [
    [{ id: 'Acme!' }, /connection id/],
    [{ idpEntityId: '' }, /idpEntityId/],
    [{ idpEntityId: 'https://idp.example.org/#frag' }, /idpEntityId/],
    [{ idpSsoUrl: 'http://idp.example.org/sso' }, /idpSsoUrl/],
    [{ idpSsoUrl: 'https://user:pw@idp.example.org/sso' }, /idpSsoUrl/],
    [{ idpCertificates: [] }, /idpCertificates/],
    [{ idpCertificates: ['c2VjcmV0LXZhbHVl'] }, /idpCertificates/],
    [{ allowedEmailDomains: [] }, /allowedEmailDomains/],
    [{ allowedEmailDomains: ['*.example.org'] }, /allowedEmailDomains/],
    [{ emailAttribute: '' }, /emailAttribute/],
    [{ groupsAttribute: '' }, /groupsAttribute/],
    [{ spEntityId: '' }, /spEntityId/],
    [{ acsUrl: 'http://backup.example.org/acs' }, /acsUrl/],
    [{ acsUrl: 'not a url' }, /acsUrl/],
    [{ clockSkewSeconds: -1 }, /clockSkewSeconds/],
    [{ clockSkewSeconds: 1.5 }, /clockSkewSeconds/],
  ];
  for (const [extra, field] of cases) {
    try {
      checkSamlConnection(connection(extra));
      t.fail(`accepted ${JSON.stringify(extra)}`);
    } catch (e) {
      t.ok(isIdentityError(e, 'ERR_IDENTITY_INVALID_ARGUMENT'));
      t.match((e as Error).message, field);
      t.notMatch((e as Error).message, /secret-value|c2VjcmV0|user:pw|evil|#frag/, 'no value in the message');
    }
  }
  t.throws(() => samlSubject('acme', 'https://idp/#x', 'n'), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
  t.throws(() => samlSubject('acme', IDP_ENTITY, ''), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
  t.match(samlCertificateFingerprint(idp.cert), /^[0-9a-f]{64}$/);
  t.equal(samlCertificateFingerprint(pemBody(idp.cert)), samlCertificateFingerprint(idp.cert));
});

t.test(
  'samlServiceProviderMetadata: entity id, ACS (HTTP-POST), persistent, assertions signed',
  async (t) => {
    const xml = samlServiceProviderMetadata(connection());
    const root = new DOMParser().parseFromString(xml, 'text/xml').documentElement!;
    t.equal(root.localName, 'EntityDescriptor');
    t.equal(root.getAttribute('entityID'), SP_ENTITY);
    const md = 'urn:oasis:names:tc:SAML:2.0:metadata';
    const sp = root.getElementsByTagNameNS(md, 'SPSSODescriptor')[0]!;
    t.equal(sp.getAttribute('WantAssertionsSigned'), 'true');
    t.equal(sp.getAttribute('AuthnRequestsSigned'), 'false');
    t.equal(sp.getElementsByTagNameNS(md, 'NameIDFormat')[0]?.textContent, SAML_NAMEID_PERSISTENT);
    const acs = sp.getElementsByTagNameNS(md, 'AssertionConsumerService')[0]!;
    t.equal(acs.getAttribute('Location'), ACS);
    t.equal(acs.getAttribute('Binding'), 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST');
    t.throws(() => samlServiceProviderMetadata(connection({ acsUrl: 'ftp://x' })), {
      code: 'ERR_IDENTITY_INVALID_ARGUMENT',
    });
  },
);

const idpMetadata = (
  o: {
    bindings?: string[];
    location?: string;
    certs?: string[];
    entityId?: string;
    encryption?: boolean;
  } = {},
) =>
  samlIdpMetadataXml({
    entityId: o.entityId ?? IDP_ENTITY,
    ssoUrl: o.location ?? SSO,
    certificates: o.certs ?? [idp.cert, rollover.cert],
    ...(o.encryption ? { encryptionCertificates: [attacker.cert] } : {}),
    ...(o.bindings ? { bindings: o.bindings } : {}),
  });

t.test('parseIdpMetadata: entity id, the Redirect SSO URL, signing certificates; refusals', async (t) => {
  const meta = parseIdpMetadata(idpMetadata({ encryption: true }));
  t.equal(meta.entityId, IDP_ENTITY);
  t.equal(meta.ssoUrl, SSO, 'the HTTP-Redirect binding, not POST');
  t.equal(meta.certificates.length, 2, 'signing keys only, not the encryption one');
  t.same(
    meta.certificates.map((c) => samlCertificateFingerprint(c)),
    [samlCertificateFingerprint(idp.cert), samlCertificateFingerprint(rollover.cert)],
  );
  // What metadata gives makes a working connection.
  const conn = connection({
    idpEntityId: meta.entityId,
    idpSsoUrl: meta.ssoUrl,
    idpCertificates: meta.certificates,
  });
  const { id, samlResponse } = await signedResponse();
  t.equal((await consume(samlResponse, id, { conn })).nameId, NAME_ID);

  const bad: [string, RegExp][] = [
    [idpMetadata({ bindings: ['HTTP-POST'] }), /HTTP-Redirect/],
    [idpMetadata({ certs: [] }), /no signing certificate/],
    [idpMetadata({ location: 'http://idp.example.org/sso' }), /https/],
    [idpMetadata({ entityId: '' }), /entityID/],
    [
      idpMetadata().replace(/<ds:X509Certificate>[^<]+</, '<ds:X509Certificate>bm90LWEtY2VydA==<'),
      /certificate/,
    ],
    ['<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/>', /aggregate/],
    ['<html><body>sign in</body></html>', /EntityDescriptor/],
    ['<md:EntityDescriptor', /well-formed/],
    [`<x>${' '.repeat(1024 * 1024)}</x>`, /1 MiB/],
    [
      `<?xml version="1.0"?><!DOCTYPE md:EntityDescriptor [<!ENTITY xxe SYSTEM "file:///etc/hostname">]>${idpMetadata()
        .replace('<?xml version="1.0" encoding="UTF-8"?>', '')
        .replace(IDP_ENTITY, '&xxe;')}`,
      /DTD/,
    ],
    [
      `<!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>${idpMetadata().replace(/^<\?xml[^>]*>/, '')}`,
      /DTD/,
    ],
  ];
  for (const [xml, why] of bad)
    t.throws(
      () => parseIdpMetadata(xml),
      { code: 'ERR_IDENTITY_INVALID_ARGUMENT', message: why },
      String(why),
    );
});

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

t.test('fetchIdpMetadata from a loopback server: read, and every way it fails', async (t) => {
  const server = createServer((req, res) => {
    switch (req.url) {
      case '/metadata':
        res.writeHead(200, { 'content-type': 'application/samlmetadata+xml' }).end(idpMetadata());
        return;
      case '/moved':
        res.writeHead(302, { location: '/metadata' }).end();
        return;
      case '/huge': {
        // Chunked, no Content-Length: the cap applies while reading.
        res.writeHead(200, { 'content-type': 'application/xml' });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        for (let i = 0; i < 20; i++) res.write(chunk);
        res.end();
        return;
      }
      case '/declared-huge':
        res.writeHead(200, { 'content-length': String(2 * 1024 * 1024) });
        res.end();
        return;
      case '/html':
        res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
        return;
      case '/slow':
        return; // never answers
      default:
        res.writeHead(404).end();
    }
  });
  const port = await listen(server);
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const base = `http://127.0.0.1:${port}`;
  const meta = await fetchIdpMetadata(`${base}/metadata`);
  t.equal(meta.entityId, IDP_ENTITY);
  t.equal(meta.ssoUrl, SSO);
  t.equal(meta.certificates.length, 2);
  t.equal(await reason(fetchIdpMetadata(`${base}/missing`)), 'unavailable:metadata-unreachable', '404');
  t.equal(await reason(fetchIdpMetadata(`${base}/moved`)), 'unavailable:metadata-unreachable', 'a redirect');
  t.equal(await reason(fetchIdpMetadata(`${base}/huge`)), 'unavailable:metadata-invalid', 'over 1 MiB');
  t.equal(
    await reason(fetchIdpMetadata(`${base}/declared-huge`)),
    'unavailable:metadata-invalid',
    'declared',
  );
  t.equal(await reason(fetchIdpMetadata(`${base}/html`)), 'unavailable:metadata-invalid', 'not metadata');
  const started = Date.now();
  t.equal(
    await reason(fetchIdpMetadata(`${base}/slow`, { timeoutMs: 300 })),
    'unavailable:metadata-unreachable',
  );
  t.ok(Date.now() - started < 5_000, 'gave up on time');
  // A closed port on loopback.
  const closed = createServer();
  const closedPort = await listen(closed);
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  t.equal(
    await reason(fetchIdpMetadata(`http://127.0.0.1:${closedPort}/metadata`)),
    'unavailable:metadata-unreachable',
  );
  for (const url of [
    'http://idp.example.org/metadata',
    'ftp://127.0.0.1/m',
    'https://u:p@idp.example.org/m',
    'nope',
  ])
    await t.rejects(fetchIdpMetadata(url), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' }, url);
  await t.rejects(fetchIdpMetadata(`${base}/metadata`, { timeoutMs: 5 }), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });
});
