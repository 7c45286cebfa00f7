/**
 * A real perimeter access key-set endpoint for tests: an https server on loopback (certificate
 * from a test-only CA) serving `/cdn-cgi/access/certs`, plus a signer of real JWTs with the
 * matching private keys. `mode` can turn the endpoint into a redirect to prove it is refused.
 */
import { createServer, type Server } from 'node:https';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import type { TestPki } from './tls.ts';

export const TEAM_DOMAIN = 'team.coffer.test';
export const AUDIENCE = 'coffer-test-aud';
export const ISSUER = `https://${TEAM_DOMAIN}`;

export interface KeySetServer {
  jwksUrl: string;
  fetches: number;
  mode: 'serve' | 'redirect';
  sign(
    claims: JWTPayload,
    options?: { alg?: 'RS256' | 'ES256'; kid?: string; expiresIn?: string | number; issuedAt?: number },
  ): Promise<string>;
  /** The RSA public key as PEM (for the HS256-with-the-public-key attack). */
  rsaPublicPem: string;
  close(): Promise<void>;
}

export async function startKeySet(pki: TestPki): Promise<KeySetServer> {
  const rsa = await generateKeyPair('RS256', { extractable: true });
  const ec = await generateKeyPair('ES256', { extractable: true });
  const rsaJwk = { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' };
  const ecJwk = { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' };
  const { createPublicKey } = await import('node:crypto');
  const rsaPublicPem = createPublicKey({ key: rsaJwk as never, format: 'jwk' }).export({
    type: 'spki',
    format: 'pem',
  }) as string;
  const state = { fetches: 0, mode: 'serve' as 'serve' | 'redirect' };
  const server: Server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    state.fetches++;
    if (state.mode === 'redirect') {
      res.writeHead(302, { location: 'https://127.0.0.1:1/elsewhere' }).end();
      return;
    }
    if (req.url !== '/cdn-cgi/access/certs') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [rsaJwk, ecJwk] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    jwksUrl: `https://127.0.0.1:${port}/cdn-cgi/access/certs`,
    get fetches() {
      return state.fetches;
    },
    get mode() {
      return state.mode;
    },
    set mode(m) {
      state.mode = m;
    },
    rsaPublicPem,
    async sign(claims, options = {}) {
      const alg = options.alg ?? 'RS256';
      const key = alg === 'RS256' ? rsa.privateKey : ec.privateKey;
      const kid = options.kid ?? (alg === 'RS256' ? 'rsa-1' : 'ec-1');
      const jwt = new SignJWT({ iss: ISSUER, aud: AUDIENCE, ...claims })
        .setProtectedHeader({ alg, kid })
        .setIssuedAt(options.issuedAt)
        .setExpirationTime(options.expiresIn ?? '5m');
      return jwt.sign(key);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The state store's role assignment, as much of it as these helpers use. */
interface RoleAssigner {
  roles: {
    assign(a: { subject: string; role: string; email: string; grantedBy: null }): Promise<unknown>;
  };
}

/** Grants each `[sub, role]` to the perimeter subject `ISSUER#sub` (email `sub@example.com`). */
export async function grantRoles(state: RoleAssigner, grants: ReadonlyArray<readonly [string, string]>) {
  for (const [sub, role] of grants) {
    await state.roles.assign({
      subject: `${ISSUER}#${sub}`,
      role,
      email: `${sub}@example.com`,
      grantedBy: null,
    });
  }
}

/** Request headers carrying a fresh perimeter assertion for `sub`. */
export function callerHeaders(keySet: KeySetServer): (sub: string) => Promise<Record<string, string>> {
  return async (sub) => ({
    'perimeter-access-jwt-assertion': await keySet.sign({ sub, email: `${sub}@example.com` }),
  });
}
