/**
 * SP-initiated SAML sign-in: the AuthnRequest (HTTP-Redirect binding, persistent NameID) whose ID
 * the engine binds to a single-use RelayState; saml-consumer.ts checks that the assertion answers it.
 */
import { randomBytes } from 'node:crypto';
import { badArgument, checkSamlConnection, type SamlConnection, samlOf } from './saml-connection.ts';

const RELAY_STATE = /^[A-Za-z0-9._~-]{1,80}$/;

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
