// The package's public surface for the tests, plus small fixtures built from it.
import { encodeKeyFile, fingerprint } from '@coffer/crypto';

export * from '../../src/index.ts';

export function encodeTrustFixture(publicKey: Uint8Array): { text: string; fp: string } {
  return { text: encodeKeyFile('signer-public', publicKey), fp: fingerprint(publicKey) };
}
