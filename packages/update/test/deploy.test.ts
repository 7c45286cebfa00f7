// The directory deployer on a temp dir, the container deployer, and a whole update end to end:
// a real https channel, real downloads, real release directories and the current pointer.
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { artefactBytes, channelServer, makeDoc, NOW, sha384, signed, trust } from './helpers/channel.ts';
import {
  ContainerDeployer,
  createUpdateExecutor,
  DirectoryDeployer,
  driveUpdate,
  fetchChannel,
  startApply,
  type UpdateRecord,
} from './helpers/exports.ts';

t.test('directory deployer: inert upload, read-back, atomic promote', async (t) => {
  const dir = tempDir(t);
  const d = new DirectoryDeployer({ dataDir: dir });
  t.equal(await d.live(), null);
  const art = join(dir, 'engine-1.4.0.tgz');
  writeFileSync(art, artefactBytes('e'));
  await d.upload('1.4.0', art);
  t.equal(await d.live(), null, 'upload changes nothing live');
  t.same(readdirSync(join(dir, 'releases')), ['1.4.0'], 'no staging directory left');
  t.equal(await d.readBack('1.4.0'), sha384(artefactBytes('e')));
  await d.promote('1.4.0');
  t.equal(await d.live(), '1.4.0');
  t.equal(readlinkSync(join(dir, 'current')), join('releases', '1.4.0'));
  t.ok(readFileSync(join(dir, 'current', 'engine-1.4.0.tgz')).length > 0, 'pointer resolves');
  await t.rejects(d.upload('1.4.0', art), { code: 'ERR_UPDATE_UPLOAD' }, 'the live release is not replaced');
  await t.rejects(d.promote('9.9.9'), { code: 'ERR_UPDATE_PROMOTE' }, 'never uploaded');
  t.equal(await d.live(), '1.4.0', 'prior still live');
  await t.rejects(d.readBack('9.9.9'), { code: 'ERR_UPDATE_READ_BACK' });
  await t.rejects(d.upload('../x', art), { code: 'ERR_UPDATE_INVALID_ARGUMENT' });
  const c = new DirectoryDeployer({ dataDir: dir, component: 'console' });
  await c.upload('1.4.0', art);
  await c.promote('1.4.0');
  t.equal(readlinkSync(join(dir, 'console-current')), join('console-releases', '1.4.0'));
  await c.promote(null);
  t.notOk(existsSync(join(dir, 'console-current')));
  t.ok(
    readdirSync(dir).every((n) => !n.endsWith('.tmp')),
    'no temporary pointer left',
  );
});

t.test('container deployer reports what the orchestrator must do', async (t) => {
  const dir = tempDir(t);
  const art = join(dir, 'a');
  writeFileSync(art, 'abc');
  const d = new ContainerDeployer({ image: 'ghcr.io/acme/coffer-engine', running: '1.3.0' });
  t.equal(await d.live(), '1.3.0');
  t.equal((await d.upload('1.4.0', art)).action, 'none');
  t.equal(await d.readBack('1.4.0'), sha384(new TextEncoder().encode('abc')));
  t.same(await d.promote('1.4.0'), {
    action: 'orchestrator',
    message: 'set the image of the engine deployment to ghcr.io/acme/coffer-engine:1.4.0 and restart it',
  });
});

t.test('end to end: 1.3.0 to 1.4.0 over https; a dead canary rolls back to 1.3.0', async (t) => {
  const dir = tempDir(t);
  const srv = await channelServer(t, dir);
  const data = join(dir, 'data');
  const engine = new DirectoryDeployer({ dataDir: data });
  // 1.3.0 is live.
  const old = join(dir, 'engine-1.3.0.tgz');
  writeFileSync(old, artefactBytes('engine-1.3.0'));
  await engine.upload('1.3.0', old);
  await engine.promote('1.3.0');

  const bytes = artefactBytes('engine-1.4.0');
  srv.routes.set('/stable/channel.json', { body: signed(makeDoc({ engine: bytes, console: null })) });
  srv.routes.set('/stable/engine-1.4.0.tgz', { body: bytes });
  const channel = await fetchChannel(srv.url, { trust, ca: srv.pki.caCert, now: NOW });

  for (const verdict of ['alive', 'dead'] as const) {
    if (verdict === 'dead') await engine.promote('1.3.0');
    const records: UpdateRecord[] = [];
    const liveAtCanary: (string | null)[] = [];
    const exec = createUpdateExecutor({
      channel,
      deployers: { engine },
      download: { dir: join(data, 'downloads'), ca: srv.pki.caCert },
      persist: async (r) => {
        records.push(r);
      },
      canary: async () => {
        liveAtCanary.push(await engine.live());
        return verdict;
      },
      wait: async () => {},
    });
    const reply = await driveUpdate(
      startApply({
        channel,
        running: { engine: '1.3.0' },
        floors: { engine: '1.3.0' },
        runningSchemaEpoch: 1,
        dryRun: false,
        destinationConfigured: true,
        id: `upd_${verdict}`,
        now: new Date(NOW).toISOString(),
      }),
      exec,
    );
    t.same(liveAtCanary, ['1.4.0'], `${verdict}: the canary flew on the new version`);
    if (verdict === 'alive') {
      t.equal(reply.outcome, 'applied');
      t.equal(await engine.live(), '1.4.0');
      t.same(reply.record!.floors, { engine: '1.4.0' });
    } else {
      t.equal(reply.outcome, 'rolled-back');
      t.equal(await engine.live(), '1.3.0', 'rolled back');
      t.ok(
        records.some((r) => r.outcome === 'rollback-failed' && r.phase === 'rolling-back'),
        'persisted first',
      );
    }
    t.same(reply.record!.from, { engine: '1.3.0' });
  }
  // A dry run touches nothing.
  const before = readdirSync(join(data, 'releases')).sort();
  const exec = createUpdateExecutor({
    channel,
    deployers: { engine },
    download: { dir: join(data, 'downloads'), ca: srv.pki.caCert },
    persist: async () => {
      t.fail('a dry run persists nothing');
    },
    canary: async () => 'alive',
  });
  const dry = await driveUpdate(
    startApply({
      channel,
      running: { engine: '1.3.0' },
      floors: {},
      runningSchemaEpoch: 1,
      destinationConfigured: true,
      id: 'd',
      now: 'x',
    }),
    exec,
  );
  t.equal(dry.outcome, 'dry-run');
  t.same(readdirSync(join(data, 'releases')).sort(), before);
  t.equal(await engine.live(), '1.3.0');
});
