/**
 * The notify tests' certificate authority and server certificate (@coffer/testkit's test PKI). The
 * certificate also names the public-looking hosts the tests' resolver hook answers with 127.0.0.1,
 * so a send that connects to the pinned address still verifies the certificate against the host
 * name (SNI).
 */
import { makeTestPki, type TestPki } from '@coffer/testkit';

export type { TestPki };

export const CERT_NAMES = ['localhost', '*.example.com', 'chat.googleapis.com', 'events.pagerduty.com'];

export function makePki(dir: string): TestPki {
  return makeTestPki(dir, { names: CERT_NAMES, caName: 'coffer notify test CA' });
}
