// Settle and rollback after a live apply promoted both components (this in-process engine has no
// restart hook: the record stays `settling` as the restarted program would find it): a dead
// canary persists its outcome, switches both pointers back and reports any component whose
// rollback deploy failed; a rollback names one component (the
// console alone) and refuses a component with no earlier version; configuration errors of the
// ENGINE_UPDATE_* variables stop the start naming the variable; an air-gapped channel directory.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import { DirectoryDeployer, signChannel, type UpdateRecord } from '@coffer/update';
import t, { type Test } from 'tap';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { artefact, channelSite, release, signer, updateEngine } from './helpers.ts';

async function promotedEngine(t: Test) {
  const site = await channelSite(t);
  site.publish(release({ sequence: 1 }));
  const dataDir = tempDir(t);
  // The console is installed at 1.3.0 (a release and its pointer), so it has a rollback target.
  const consoleDeployer = new DirectoryDeployer({ dataDir, component: 'console' });
  const file = join(tempDir(t), 'console-1.3.0.tgz');
  writeFileSync(file, artefact('console-1.3.0'));
  await consoleDeployer.upload('1.3.0', file);
  await consoleDeployer.promote('1.3.0');
  const e = await updateEngine(t, site, { dataDir });
  const up = await e.post(
    '/update/apply',
    { dryRun: false },
    { 'x-engine-deploy-token': await e.deployToken() },
  );
  t.equal(up.status, 202, up.text);
  const record = up.json().record as UpdateRecord;
  t.same(record.from, { engine: '1.3.0', console: '1.3.0' });
  t.equal(record.phase, 'settling');
  return { e, site, dataDir, consoleDeployer };
}

t.test('a dead canary switches both components back', async (t) => {
  const { e, consoleDeployer, dataDir } = await promotedEngine(t);
  // While a promoted update awaits its verdict, no live apply replaces its record (409).
  const busy = await e.post(
    '/update/apply',
    { dryRun: false },
    { 'x-engine-deploy-token': await e.deployToken() },
  );
  t.equal(busy.status, 409);
  t.match(busy.json(), {
    outcome: 'refused',
    step: 'settle',
    code: null,
    record: { phase: 'settling' },
  });
  t.match((await e.post('/update/apply', {})).json(), { outcome: 'dry-run' }, 'a dry run still answers');
  t.ok(existsSync(join(dataDir, 'current')), 'the engine pointer names the release');
  const r = await e.post('/update/settle', { verdict: 'dead' });
  t.equal(r.status, 200, r.text);
  // The running engine (1.3.0) is the installed program: going back to it removes the pointer.
  t.match(r.json(), {
    outcome: 'rolled-back',
    record: { status: 'settled', outcome: 'rolled-back', phase: 'done', rollbackFailed: [] },
  });
  t.notOk(existsSync(join(dataDir, 'current')), 'the installed engine is current again');
  t.equal(await consoleDeployer.live(), '1.3.0');
  t.match((await e.get('/update/status')).json(), { record: { outcome: 'rolled-back' }, floors: {} });
  t.match((await e.post('/update/settle', { verdict: 'alive' })).json(), { code: 'ERR_UPDATE_NO_PENDING' });
});

t.test('a dead canary persists rollback-failed naming the component it could not revert', async (t) => {
  const { e, dataDir } = await promotedEngine(t);
  // The console's prior release vanished from disk: its rollback deploy cannot succeed.
  rmSync(join(dataDir, 'console-releases', '1.3.0'), { recursive: true, force: true });
  const r = await e.post('/update/settle', { verdict: 'dead' });
  t.equal(r.status, 200, r.text);
  t.match(r.json(), {
    outcome: 'rollback-failed',
    record: { status: 'settled', outcome: 'rollback-failed', phase: 'done', rollbackFailed: ['console'] },
  });
  t.notOk(existsSync(join(dataDir, 'current')), 'the engine went back all the same');
  t.match((await e.get('/update/status')).json(), { record: { outcome: 'rollback-failed' }, floors: {} });
});

t.test('rollback per component: the console alone', async (t) => {
  const { e, consoleDeployer } = await promotedEngine(t);
  t.match((await e.post('/update/settle', { verdict: 'undecided' })).json(), {
    outcome: 'awaiting-canary',
    record: { status: 'pending', phase: 'awaiting-canary' },
  });
  t.match((await e.post('/update/settle', { verdict: 'alive' })).json(), { outcome: 'applied' });
  const r = await e.post('/update/rollback', { component: 'console' });
  t.equal(r.status, 200, r.text);
  t.match(r.json(), { outcome: 'rolled-back', record: { components: ['console'], outcome: 'rolled-back' } });
  t.equal(await consoleDeployer.live(), '1.3.0');
  t.same(
    (await e.get('/update/status')).json().floors,
    { engine: '1.4.0', console: '1.4.0' },
    'a rollback never lowers the floor',
  );
  t.equal((await e.post('/update/rollback', { component: 'agent' })).status, 400, 'unknown component');
  const rows = (await e.get('/audit?action=update-rollback&limit=10')).json().events as {
    target: string;
    detail: { from: string; to: string };
  }[];
  t.match(rows.at(-1) ?? rows[0], { target: 'console', detail: { from: '1.4.0', to: '1.3.0' } });
});

t.test('ENGINE_UPDATE_* configuration', async (t) => {
  const dir = tempDir(t);
  const pub = join(dir, 'channel.pub');
  writeFileSync(pub, encodeKeyFile('signer-public', signer.publicKey));
  const sec = join(dir, 'channel.key');
  writeFileSync(sec, encodeKeyFile('signer-secret', signer.secretKey));
  const ca = join(dir, 'ca.pem');
  writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  const load = (env: Record<string, string>) => loadConfig({ ENGINE_DATA_DIR: dir, ...env }, dir);
  const refused = (env: Record<string, string>, variable: string, label: string) =>
    t.throws(() => load(env), { name: 'ConfigError', variable }, label);

  t.equal(load({}).update, undefined, 'unset: no channel');
  t.match(
    load({
      ENGINE_UPDATE_CHANNEL: 'https://updates.example.org/stable/',
      ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: 'channel.pub',
      ENGINE_UPDATE_CA_FILE: 'ca.pem',
    }).update,
    {
      channel: 'https://updates.example.org/stable/',
      signerPublicKey: { path: pub },
      ca: /BEGIN CERTIFICATE/,
      deployer: 'directory',
      image: undefined,
    },
  );
  t.match(load({ ENGINE_UPDATE_CHANNEL: dir, ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: pub }).update, {
    channel: dir,
  });
  const base = { ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: pub };
  refused({ ...base, ENGINE_UPDATE_CHANNEL: 'http://updates.example.org/' }, 'ENGINE_UPDATE_CHANNEL', 'http');
  refused(
    { ...base, ENGINE_UPDATE_CHANNEL: 'https://u:p@updates.example.org/' },
    'ENGINE_UPDATE_CHANNEL',
    'credentials',
  );
  refused({ ...base, ENGINE_UPDATE_CHANNEL: 'relative/dir' }, 'ENGINE_UPDATE_CHANNEL', 'relative path');
  refused({ ENGINE_UPDATE_CHANNEL: dir }, 'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'no pinned key');
  refused(base, 'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'a key without a channel');
  refused(
    { ENGINE_UPDATE_CHANNEL: dir, ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: sec },
    'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE',
    'a secret key',
  );
  refused(
    { ENGINE_UPDATE_CHANNEL: dir, ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: join(dir, 'missing') },
    'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE',
    'unreadable',
  );
  refused({ ENGINE_UPDATE_CA_FILE: pub }, 'ENGINE_UPDATE_CA_FILE', 'not PEM certificates');
  refused({ ENGINE_UPDATE_DEPLOYER: 'k8s' }, 'ENGINE_UPDATE_DEPLOYER', 'unknown deployer');
  refused({ ENGINE_UPDATE_IMAGE: 'Bad Image' }, 'ENGINE_UPDATE_IMAGE', 'bad image');

  // A file that looks like a public key but is not a signer key stops the build.
  const bogus = join(dir, 'bogus.pub');
  writeFileSync(
    bogus,
    '-----BEGIN COFFER SIGNER PUBLIC KEY-----\nnot a key\n-----END COFFER SIGNER PUBLIC KEY-----\n',
  );
  await t.rejects(
    buildApp({
      config: load({ ENGINE_UPDATE_CHANNEL: dir, ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: bogus }),
      logger: false,
    }),
    { name: 'ConfigError', variable: 'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE' },
  );
});

t.test('an air-gapped channel directory', async (t) => {
  const dir = tempDir(t);
  const channelDir = join(dir, 'stable');
  mkdirSync(channelDir);
  const rel = release({ sequence: 3 });
  writeFileSync(join(channelDir, 'channel.json'), signChannel(rel.doc, signer.secretKey));
  for (const [name, bytes] of rel.files) writeFileSync(join(channelDir, name), bytes);
  const pub = join(dir, 'channel.pub');
  writeFileSync(pub, encodeKeyFile('signer-public', signer.publicKey));
  const e = await updateEngine(t, null, {
    env: { ENGINE_UPDATE_CHANNEL: channelDir, ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: pub },
  });
  t.match((await e.get('/updates')).json(), { configured: true, verified: true, channel: { sequence: 3 } });
  t.match((await e.post('/update/apply', {})).json(), { outcome: 'dry-run' });
});
