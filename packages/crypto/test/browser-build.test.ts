// The browser build: bundled by esbuild for the browser it pulls in no Node built-in, and loaded
// in Node (which has WebCrypto on globalThis.crypto) it interoperates with the node build in both
// directions: signatures, capsules, wrapped keys, AEAD, hashes and key files.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import t from 'tap';
import * as node from '../src/index.ts';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const enc = new TextEncoder();

const result = await build({
  entryPoints: [new URL('../src/browser.ts', import.meta.url).pathname],
  bundle: true,
  platform: 'browser',
  conditions: ['browser', 'default'],
  format: 'esm',
  target: 'es2022',
  write: false,
  metafile: true,
  logLevel: 'silent',
});
const code = result.outputFiles[0]!.text;

t.test('package.json maps `node` to the node build and `default` to the browser build', async (t) => {
  t.same(pkg.exports['.'], {
    types: './dist/index.d.ts',
    node: './dist/index.js',
    default: './dist/browser.js',
  });
});

t.test('the browser bundle imports no Node built-in', async (t) => {
  t.same(result.errors, []);
  const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
  const imported: string[] = [];
  for (const input of Object.values(result.metafile!.inputs))
    for (const i of input.imports) imported.push(i.path);
  t.same(
    imported.filter((p) => p.startsWith('node:') || builtins.has(p)),
    [],
    'no built-in among resolved imports',
  );
  t.same(
    Object.keys(result.metafile!.inputs).filter((p) => p.includes('platform-node')),
    [],
    'platform-node not bundled',
  );
  t.notMatch(
    code,
    /\bfrom\s*["']node:|import\(\s*["']node:|\brequire\(/,
    'no import, dynamic import or require',
  );
  t.ok(code.length > 10000, 'the bundle has content');
});

t.test('node build and browser build accept each other', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-crypto-browser-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'coffer-crypto.browser.mjs');
  writeFileSync(file, code);
  const web = (await import(pathToFileURL(file).href)) as typeof node;
  t.equal(web.platformName, 'web');
  t.equal(node.platformName, 'node');
  t.same(Object.keys(web).sort(), Object.keys(node).sort(), 'same exports');

  const msg = enc.encode('{"manifest":1}');
  const ctx = 'coffer/cross-check';
  const nodeSigner = node.generateSigner();
  const webSigner = web.generateSigner();
  t.ok(
    web.verify(nodeSigner.publicKey, msg, node.sign(nodeSigner.secretKey, msg, ctx), ctx),
    'node signs, web verifies',
  );
  t.ok(
    node.verify(webSigner.publicKey, msg, web.sign(webSigner.secretKey, msg, ctx), ctx),
    'web signs, node verifies',
  );
  t.notOk(web.verify(nodeSigner.publicKey, msg, node.sign(nodeSigner.secretKey, msg, ctx), `${ctx}!`));

  const aad = enc.encode('aad');
  const nodeR = node.generateRecipient();
  const webR = web.generateRecipient();
  t.same(
    await web.open(nodeR.secretKey, await node.seal(nodeR.publicKey, msg, aad), aad),
    msg,
    'node seals, web opens',
  );
  t.same(
    await node.open(webR.secretKey, await web.seal(webR.publicKey, msg, aad), aad),
    msg,
    'web seals, node opens',
  );
  const dataKey = node.randomBytes(32);
  const wrapped = await web.wrapKey(dataKey, [nodeR.publicKey, webR.publicKey], aad);
  t.same(await node.unwrapKey(nodeR.secretKey, wrapped, aad), dataKey);
  t.same(
    await web.unwrapKey(webR.secretKey, await node.wrapKey(dataKey, [webR.publicKey], aad), aad),
    dataKey,
  );
  await t.rejects(web.open(webR.secretKey, await node.seal(nodeR.publicKey, msg, aad), aad), {
    code: 'ERR_CRYPTO_WRONG_KEY',
  });

  const key = node.randomBytes(32);
  const nonce = node.randomBytes(12);
  const big = node.randomBytes(3 * 256 * 1024 + 5);
  const sealed = await node.aeadEncrypt(key, nonce, big, aad);
  t.same(await web.aeadEncrypt(key, nonce, big, aad), sealed, 'identical AES-GCM output');
  t.same(await web.aeadDecrypt(key, nonce, sealed, aad), big);
  t.equal(web.sha384Digest(big), node.sha384Digest(big));
  const h = web.createSha384();
  h.update(big.subarray(0, 1000)).update(big.subarray(1000));
  t.same(h.digest(), node.sha384(big));
  t.equal(web.canonicalJson({ b: [1, 2e-7], a: 'x' }), node.canonicalJson({ b: [1, 2e-7], a: 'x' }));

  const file1 = node.encodeKeyFile('recipient-public', nodeR.publicKey);
  t.equal(web.encodeKeyFile('recipient-public', nodeR.publicKey), file1);
  t.same(web.decodeKeyFile(file1, 'recipient-public').key, nodeR.publicKey);
  t.equal(web.fingerprint(webSigner.publicKey), node.fingerprint(webSigner.publicKey));
  // Errors from the browser build carry the same codes.
  t.throws(() => web.decodeKeyFile(file1, 'signer-public'), { code: 'ERR_CRYPTO_WRONG_KIND' });
});

t.test(
  'the package name resolves per condition (self-reference through the exports map; needs a build)',
  async (t) => {
    const viaName = (await import('@coffer/crypto')) as typeof node;
    t.equal(viaName.platformName, 'node', 'Node picks the `node` build');
    const bundled = await build({
      stdin: {
        contents: "export * from '@coffer/crypto';",
        resolveDir: new URL('..', import.meta.url).pathname,
      },
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(bundled.metafile!.inputs);
    t.ok(
      inputs.some((p) => p.endsWith('dist/browser.js')),
      'a browser bundler picks dist/browser.js',
    );
    t.notOk(
      inputs.some((p) => p.includes('platform-node')),
      'and never the node platform',
    );
    t.notMatch(bundled.outputFiles[0]!.text, /\bfrom\s*["']node:|\brequire\(/);
  },
);
