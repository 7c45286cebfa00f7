/**
 * The SAML assertion consumer: a signed assertion (the Response's signature alone is not enough),
 * its issuer, audience, recipient, time window with a bounded clock skew and InResponseTo, a
 * persistent NameID, an email in an allowed domain, and the subject
 * `saml:<connection id>:<entity id>#<NameID>` (rule 7: never the email).
 *
 * node-saml verifies the signature (against the connection's certificates only, never a key the
 * response carries), refuses a second assertion and checks audience and time; every value the
 * result holds is then read again from the verified assertion alone and checked here, including
 * what node-saml does not check (Recipient, Destination, the issuer, InResponseTo).
 */
import { timingSafeEqual } from 'node:crypto';
import { SamlStatusError } from '@node-saml/node-saml';
import { IdentityError, type SamlRefusal } from './errors.ts';
import { normaliseEmail } from './people.ts';
import {
  BASE64,
  badArgument,
  checkSamlConnection,
  SAML_DEFAULT_CLOCK_SKEW_SECONDS,
  SAML_DEFAULT_EMAIL_ATTRIBUTES,
  SAML_NAMEID_PERSISTENT,
  type SamlConnection,
  samlOf,
  samlSubject,
} from './saml-connection.ts';
import { attr, child, children, is, NS_DS, parseXml, textOf } from './saml-xml.ts';

/** The largest `SAMLResponse` form field read (base64 text, before decoding): 256 KiB. */
export const SAML_RESPONSE_MAX_CHARS = 256 * 1024;

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

// xs:dateTime as SAML requires it: UTC, no other zone.
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;
const NS_SAMLP = 'urn:oasis:names:tc:SAML:2.0:protocol';
const NS_SAML = 'urn:oasis:names:tc:SAML:2.0:assertion';
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
