import { get } from 'node:https';
import { connect } from 'node:tls';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { BASE_HARDENING, FULL_HARDENING } from '../src/plugins/conventions.ts';
import { startEngine } from './helpers/engine.ts';
import { makePki } from './helpers/tls.ts';

/** Sends one raw HTTP/1.1 request over a TLS connection limited to `maxVersion`. */
function rawRequest(port: number, ca: string, maxVersion: 'TLSv1' | 'TLSv1.1' | 'TLSv1.2', path: string) {
  return new Promise<{ protocol: string | null; response: string }>((resolve, reject) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      ca,
      servername: 'localhost',
      minVersion: 'TLSv1',
      maxVersion,
      // OpenSSL 3 refuses TLS 1.0/1.1 above security level 0, on the client as on the server.
      ciphers: 'DEFAULT@SECLEVEL=0',
    });
    let response = '';
    socket.on('secureConnect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    });
    socket.on('data', (d) => {
      response += d.toString('utf8');
    });
    socket.on('end', () => resolve({ protocol: socket.getProtocol(), response }));
    socket.on('error', reject);
  });
}

t.test('the engine serves https itself and answers TLS 1.1 or older with a plaintext 426', async (t) => {
  const pki = makePki(tempDir(t));
  const { url } = await startEngine(t, {
    ENGINE_TLS_CERT_FILE: pki.certFile,
    ENGINE_TLS_KEY_FILE: pki.keyFile,
  });
  t.match(url, /^https:\/\//);
  const port = Number(new URL(url).port);

  for (const version of ['TLSv1.1', 'TLSv1'] as const) {
    for (const path of ['/ready', '/admin/jobs', '/nope']) {
      const { protocol, response } = await rawRequest(port, pki.caCert, version, path);
      t.equal(protocol, version, `negotiated ${version}`);
      t.match(response, /^HTTP\/1\.1 426 /, `${version} ${path}: 426`);
      t.match(response, /content-type: text\/plain/i);
      t.match(response, /upgrade required: TLS 1\.2 or newer/);
      t.notMatch(response, /"status":"ready"/, 'no route ran');
      // The 426 carries its family's header set like every other response.
      const full = path.startsWith('/admin/');
      for (const [name, value] of Object.entries(full ? FULL_HARDENING : BASE_HARDENING)) {
        t.match(
          response,
          new RegExp(`\\r\\n${name}: ${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\r\\n`, 'i'),
          `${version} ${path}: ${name}`,
        );
      }
      if (!full) t.notMatch(response, /strict-transport-security/i, `${path}: base set only`);
    }
  }

  const modern = await rawRequest(port, pki.caCert, 'TLSv1.2', '/ready');
  t.equal(modern.protocol, 'TLSv1.2');
  t.match(modern.response, /^HTTP\/1\.1 200 /);

  const body = await new Promise<string>((resolve, reject) => {
    get(`${url}/ready`, { ca: pki.caCert, servername: 'localhost' }, (res) => {
      let text = '';
      const protocol = (res.socket as import('node:tls').TLSSocket).getProtocol();
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => resolve(`${res.statusCode} ${protocol} ${text}`));
    }).on('error', reject);
  });
  t.match(body, /^200 TLSv1\.3 \{"status":"ready"/, 'a default client negotiates TLS 1.3 and is served');
});
