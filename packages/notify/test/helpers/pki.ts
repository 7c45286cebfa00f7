/**
 * A throwaway certificate authority and one server certificate for the loopback receivers, made
 * with the openssl CLI at test time (as apps/engine/test/helpers/tls.ts does). The certificate
 * names the public-looking hosts the tests' resolver hook answers with 127.0.0.1, so a send that
 * connects to the pinned address still verifies the certificate against the host name (SNI).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestPki {
  caCert: string;
  cert: string;
  key: string;
}

export const CERT_NAMES = ['localhost', '*.example.com', 'chat.googleapis.com', 'events.pagerduty.com'];

export function makePki(dir: string): TestPki {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=coffer notify test CA',
  ]);
  run([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=localhost',
  ]);
  const san = ['IP:127.0.0.1', ...CERT_NAMES.map((n) => `DNS:${n}`)].join(',');
  writeFileSync(join(dir, 'ext.cnf'), `subjectAltName=${san}\n`);
  run([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'ext.cnf',
  ]);
  return {
    caCert: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    cert: readFileSync(join(dir, 'server.pem'), 'utf8'),
    key: readFileSync(join(dir, 'server.key'), 'utf8'),
  };
}
