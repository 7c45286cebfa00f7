/** Constructors for the errors several modules throw, so the wording stays identical. */
import { AuthzError } from '../errors.ts';

export function unknownRole(): AuthzError {
  return new AuthzError('ERR_AUTHZ_UNKNOWN_ROLE', 'not a built-in role');
}

export function unknownCapability(): AuthzError {
  return new AuthzError('ERR_AUTHZ_UNKNOWN_CAPABILITY', 'not one of the 21 capabilities');
}
