/**
 * A throwaway certificate authority and one server certificate, made with the openssl CLI in a
 * test's temporary directory (nothing is trusted process-wide): tests hand `caCert` (or `caFile`)
 * to the client under test and `cert`/`key` to a loopback HTTPS server. The certificate names
 * 127.0.0.1 and `localhost`, plus any `names` given (hosts a test's resolver hook maps to loopback).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestPki {
  caCert: string;
  caFile: string;
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

export function makeTestPki(dir: string, options: { names?: string[]; caName?: string } = {}): TestPki {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const caName = options.caName ?? 'coffer test CA';
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
    `/CN=${caName}`,
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
  const names = ['localhost', ...(options.names ?? []).filter((n) => n !== 'localhost')];
  writeFileSync(
    join(dir, 'ext.cnf'),
    `subjectAltName=${['IP:127.0.0.1', ...names.map((n) => `DNS:${n}`)].join(',')}\n`,
  );
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
    caFile: join(dir, 'ca.pem'),
    cert: readFileSync(join(dir, 'server.pem'), 'utf8'),
    key: readFileSync(join(dir, 'server.key'), 'utf8'),
    certFile: join(dir, 'server.pem'),
    keyFile: join(dir, 'server.key'),
  };
}
