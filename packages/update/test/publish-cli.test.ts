// coffer-update-publish as an operator runs it (the built bin, a child process); its output is
// checked by the verifier, and its artefacts by the downloader.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { artefactBytes, sha384 } from './helpers/channel.ts';
import { downloadArtefact, fetchChannel, trustFromKeyFile } from './helpers/exports.ts';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(
  pkg,
  JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')).bin['coffer-update-publish'],
);
const run = (args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });

t.test('keygen, publish, verify, download', async (t) => {
  const dir = tempDir(t);
  const keys = join(dir, 'keys');
  const site = join(dir, 'site');
  mkdirSync(keys);
  mkdirSync(site);
  const kg = run(['keygen', '--out-dir', keys]);
  t.equal(kg.status, 0, kg.stderr);
  const fp = kg.stdout.trim();
  t.match(fp, /^sha384:[0-9a-f]{96}$/);
  t.notMatch(kg.stdout + kg.stderr, /BEGIN COFFER SIGNER SECRET/, 'no key printed');

  const engine = artefactBytes('engine-2.0.0', 10_000);
  const consoleBytes = artefactBytes('console-2.0.0', 3_000);
  writeFileSync(join(site, 'coffer-engine-2.0.0.tgz'), engine);
  writeFileSync(join(site, 'coffer-console-2.0.0.tgz'), consoleBytes);
  const pub = run([
    '--key',
    join(keys, 'channel-signer.key'),
    '--sequence',
    '42',
    '--version',
    '2.0.0',
    '--engine',
    join(site, 'coffer-engine-2.0.0.tgz'),
    '--console',
    join(site, 'coffer-console-2.0.0.tgz'),
    '--console-version',
    '2.0.0',
    '--min-engine',
    '1.9.0',
    '--risk',
    'security',
    '--step',
    'back up the state database first',
    '--schema-epoch',
    '3',
    '--issued-at',
    '2026-05-01T00:00:00Z',
    '--expires-in',
    '14d',
    '--out',
    join(site, 'channel.json'),
  ]);
  t.equal(pub.status, 0, pub.stderr);
  t.equal(pub.stderr.trim(), `signed stable sequence 42 version 2.0.0 by ${fp}`);

  const trust = trustFromKeyFile(readFileSync(join(keys, 'channel-signer.pub'), 'utf8'), fp);
  const ch = await fetchChannel(site, { trust, now: Date.parse('2026-05-02T00:00:00Z'), lastSequence: 41 });
  t.same(ch.document.recommended, {
    version: '2.0.0',
    minEngineVersion: '1.9.0',
    risk: 'security',
    requiredSteps: ['back up the state database first'],
    schemaEpoch: 3,
    migration: false,
  });
  t.equal(ch.document.expiresAt, '2026-05-15T00:00:00Z');
  t.same(ch.document.components.engine, {
    version: '2.0.0',
    url: 'coffer-engine-2.0.0.tgz',
    sha384: sha384(engine),
    size: engine.length,
  });
  const a = await downloadArtefact(ch, 'console', { dir: join(dir, 'dl') });
  t.same(new Uint8Array(readFileSync(a.path)), consoleBytes);
});

t.test('exit codes: 2 for usage, 1 for a refused input', async (t) => {
  const dir = tempDir(t);
  t.equal(run([]).status, 2, 'nothing given');
  t.equal(run(['--bogus']).status, 2, 'unknown flag');
  writeFileSync(join(dir, 'e'), 'x');
  const notKey = run([
    '--key',
    join(dir, 'e'),
    '--sequence',
    '1',
    '--version',
    '1.0.0',
    '--engine',
    join(dir, 'e'),
  ]);
  t.equal(notKey.status, 1);
  t.match(notKey.stderr, /ERR_UPDATE_TRUST_CONFIG/);
  const kg = run(['keygen', '--out-dir', dir]);
  t.equal(kg.status, 0);
  const key = join(dir, 'channel-signer.key');
  const badVersion = run(['--key', key, '--sequence', '1', '--version', 'v1', '--engine', join(dir, 'e')]);
  t.equal(badVersion.status, 1);
  t.match(badVersion.stderr, /ERR_UPDATE_MALFORMED_CHANNEL/);
  const missing = run(['--key', key, '--sequence', '1', '--version', '1.0.0', '--engine', join(dir, 'nope')]);
  t.equal(missing.status, 1);
  t.match(missing.stderr, /ERR_UPDATE_INVALID_ARGUMENT/);
  t.notMatch(missing.stderr + badVersion.stderr, /BEGIN COFFER/, 'no key text in errors');
});
