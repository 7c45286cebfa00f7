/**
 * The engine tests' certificate authority and server certificate for 127.0.0.1/localhost: the
 * shared test PKI of @coffer/testkit (openssl in a temporary directory; nothing trusted
 * process-wide).
 */
import { makeTestPki, type TestPki } from '@coffer/testkit';

export type { TestPki };

export function makePki(dir: string): TestPki {
  return makeTestPki(dir);
}
