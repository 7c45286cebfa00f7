// Fetching over real https (127.0.0.1, test CA) and from a directory; artefact downloads.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { artefactBytes, channelServer, makeDoc, NOW, signed, trust } from './helpers/channel.ts';
import { downloadArtefact, fetchChannel, isUpdateError, MAX_REDIRECTS } from './helpers/exports.ts';

async function code(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return isUpdateError(e) ? e.code : `not an UpdateError: ${(e as Error).stack}`;
  }
}

async function setup(t: { teardown(fn: () => unknown): void }) {
  const dir = tempDir(t);
  const srv = await channelServer(t, dir);
  const engine = artefactBytes('engine-1.4.0');
  const consoleBytes = artefactBytes('console-1.4.0', 2048);
  const doc = makeDoc({ engine, console: consoleBytes });
  srv.routes.set('/stable/channel.json', { body: signed(doc) });
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: engine });
  srv.routes.set('/stable/console-1.4.0.tgz', { body: consoleBytes });
  const opts = { trust, ca: srv.pki.caCert, now: NOW };
  return { dir, srv, engine, consoleBytes, doc, opts };
}

t.test('https channel and artefacts', async (t) => {
  const { dir, srv, engine, opts } = await setup(t);
  const ch = await fetchChannel(srv.url, opts);
  t.equal(ch.document.recommended.version, '1.4.0');
  t.equal(ch.source, srv.url);
  const out = join(dir, 'artefacts');
  const a = await downloadArtefact(ch, 'engine', { dir: out, ca: srv.pki.caCert });
  t.equal(a.path, join(out, '1.4.0', 'engine-1.4.0.tgz'));
  t.same(new Uint8Array(readFileSync(a.path)), engine);
  t.equal(statSync(a.path).mode & 0o777, 0o644, 'not executable');
  t.same(readdirSync(join(out, '1.4.0')), ['engine-1.4.0.tgz'], 'no temporary file left');
  t.equal(a.channelDigest, ch.digest);
  t.equal(
    await code(fetchChannel(srv.url, { trust, now: NOW })),
    'ERR_UPDATE_FETCH',
    'system roots do not know the test CA',
  );
  t.equal(await code(fetchChannel(srv.url.replace('https:', 'http:'), opts)), 'ERR_UPDATE_INSECURE_URL');
  t.equal(await code(fetchChannel(`${srv.origin}/nothing`, opts)), 'ERR_UPDATE_FETCH', '404');
});

t.test('redirects: same origin followed a few times, another host never', async (t) => {
  const { srv, opts } = await setup(t);
  srv.routes.set('/moved', { redirect: '/stable/channel.json', status: 301 });
  t.equal((await fetchChannel(`${srv.origin}/moved`, opts)).source, srv.url, 'same-origin redirect followed');
  // localhost is another origin than 127.0.0.1 (and the certificate names both).
  srv.routes.set('/elsewhere', { redirect: srv.url.replace('127.0.0.1', 'localhost') });
  srv.hits.length = 0;
  t.equal(await code(fetchChannel(`${srv.origin}/elsewhere`, opts)), 'ERR_UPDATE_REDIRECT');
  t.same(srv.hits, ['/elsewhere'], 'the other host was never asked');
  for (let i = 0; i <= MAX_REDIRECTS; i++) srv.routes.set(`/r${i}`, { redirect: `/r${i + 1}` });
  srv.routes.set(`/r${MAX_REDIRECTS + 1}`, { redirect: '/stable/channel.json' });
  t.equal(await code(fetchChannel(`${srv.origin}/r0`, opts)), 'ERR_UPDATE_REDIRECT', 'too many');
  srv.routes.set('/stable/engine-1.4.0.tgz', { redirect: 'https://localhost:1/engine.tgz' });
  const ch = await fetchChannel(srv.url, opts);
  t.equal(
    await code(downloadArtefact(ch, 'engine', { dir: tempDir(t), ca: srv.pki.caCert })),
    'ERR_UPDATE_REDIRECT',
    'artefact too',
  );
});

t.test('channel size bound: announced and streamed', async (t) => {
  const { srv, opts } = await setup(t);
  const big = new Uint8Array(4096).fill(32);
  srv.routes.set('/big', { body: big });
  srv.routes.set('/big-chunked', { body: big, contentLength: 'omit' });
  t.equal(await code(fetchChannel(`${srv.origin}/big`, { ...opts, maxBytes: 1000 })), 'ERR_UPDATE_TOO_LARGE');
  t.equal(
    await code(fetchChannel(`${srv.origin}/big-chunked`, { ...opts, maxBytes: 1000 })),
    'ERR_UPDATE_TOO_LARGE',
  );
});

t.test('channel replay and expiry through fetch', async (t) => {
  const { srv, opts } = await setup(t);
  t.equal(
    await code(fetchChannel(srv.url, { ...opts, lastSequence: 8 })),
    'ERR_UPDATE_SEQUENCE_ROLLBACK',
    'lowered sequence',
  );
  t.equal(
    await code(fetchChannel(srv.url, { ...opts, now: Date.parse('2026-07-01T00:00:00Z') })),
    'ERR_UPDATE_EXPIRED',
  );
});

t.test('artefacts: tampered, mix-and-match, oversized, short', async (t) => {
  const { dir, srv, engine, opts } = await setup(t);
  const ch = await fetchChannel(srv.url, opts);
  const dl = (o: { maxBytes?: number } = {}) =>
    downloadArtefact(ch, 'engine', { dir: join(dir, 'a'), ca: srv.pki.caCert, ...o });
  const noFile = () => !existsSync(join(dir, 'a', '1.4.0', 'engine-1.4.0.tgz'));

  const tampered = Uint8Array.from(engine);
  tampered[100] = tampered[100]! ^ 1;
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: tampered });
  t.equal(await code(dl()), 'ERR_UPDATE_ARTEFACT_HASH', 'tampered');
  t.ok(noFile(), 'nothing under the final name');
  t.same(readdirSync(join(dir, 'a', '1.4.0')), [], 'temporary file removed');

  // The artefact another signed document names (same size, other bytes) is refused here.
  const otherEngine = artefactBytes('engine-1.4.0-other');
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: otherEngine });
  t.equal(await code(dl()), 'ERR_UPDATE_ARTEFACT_HASH', 'mix-and-match');

  srv.hits.length = 0;
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: engine });
  t.equal(
    await code(dl({ maxBytes: engine.length - 1 })),
    'ERR_UPDATE_TOO_LARGE',
    'signed size above the bound',
  );
  t.same(srv.hits, [], 'refused before any request');

  const bigger = new Uint8Array(engine.length + 1000);
  bigger.set(engine);
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: bigger });
  t.equal(await code(dl()), 'ERR_UPDATE_TOO_LARGE', 'Content-Length above the signed size');
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: bigger, contentLength: 'omit' });
  t.equal(await code(dl()), 'ERR_UPDATE_TOO_LARGE', 'streamed past the signed size');
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: engine.subarray(0, 100) });
  t.equal(await code(dl()), 'ERR_UPDATE_ARTEFACT_SIZE', 'short');
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: engine.subarray(0, 100), contentLength: 'omit' });
  t.equal(await code(dl()), 'ERR_UPDATE_ARTEFACT_SIZE', 'short, streamed');
  t.ok(noFile());
  t.same(readdirSync(join(dir, 'a', '1.4.0')), []);
  t.equal(await code(downloadArtefact(ch, 'agent' as 'engine', { dir })), 'ERR_UPDATE_UNKNOWN_COMPONENT');
});

t.test('air-gapped: a local directory channel with relative artefacts', async (t) => {
  const dir = tempDir(t);
  const engine = artefactBytes('engine-1.4.0');
  const doc = makeDoc({ engine, console: null });
  const chDir = join(dir, 'channel');
  mkdirSync(chDir);
  writeFileSync(join(chDir, 'channel.json'), signed(doc));
  writeFileSync(join(chDir, 'engine-1.4.0.tgz'), engine);
  const ch = await fetchChannel(chDir, { trust, now: NOW });
  t.equal(ch.source, join(chDir, 'channel.json'));
  const a = await downloadArtefact(ch, 'engine', { dir: join(dir, 'out') });
  t.same(new Uint8Array(readFileSync(a.path)), engine);
  t.equal(
    (await fetchChannel(`file://${join(chDir, 'channel.json')}`, { trust, now: NOW })).digest,
    ch.digest,
  );
  writeFileSync(join(chDir, 'engine-1.4.0.tgz'), Buffer.concat([engine, Buffer.from('x')]));
  t.equal(await code(downloadArtefact(ch, 'engine', { dir: join(dir, 'out2') })), 'ERR_UPDATE_TOO_LARGE');
  t.equal(await code(fetchChannel(chDir, { trust, now: NOW, maxBytes: 100 })), 'ERR_UPDATE_TOO_LARGE');
  t.equal(await code(fetchChannel(join(dir, 'missing'), { trust, now: NOW })), 'ERR_UPDATE_FETCH');
});
