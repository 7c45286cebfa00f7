// The ramp across replicas (docs/updates.md "Promote and restart", Ramp): engines sharing one
// PostgreSQL state store, each with its own data directory and stable instance id. The replica in
// the ramp moves its pointer; the one outside stays; after `ramp/settle alive` the other follows by
// downloading the release against the record's own channel digest; a replica asked to follow
// after the channel moved on refuses.
import { readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { postgresUrl, tempDir } from '@coffer/testkit';
import { inRamp } from '@coffer/update';
import t from 'tap';
import { channelSite, release, updateEngine } from './helpers.ts';

const VERSION = '1.4.0';
const bucket = (id: string) => {
  for (let p = 1; p <= 100; p++) if (inRamp(id, VERSION, p)) return p - 1;
  return 100;
};

/** Two instance ids, the first in a lower ramp bucket than the second. */
function twoIds(): [string, string, number] {
  for (let i = 0; ; i++) {
    const a = `replica-a-${i}`;
    const b = `replica-b-${i}`;
    if (bucket(a) < bucket(b)) return [a, b, bucket(b)];
  }
}

function dataDirWithId(t: Parameters<typeof tempDir>[0], id: string): string {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'instance-id'), `${id}\n`);
  return dir;
}

const pointer = (dataDir: string) => {
  try {
    return readlinkSync(join(dataDir, 'current'));
  } catch {
    return null;
  }
};

t.test('replicas follow a ramp by instance id', async (t) => {
  const site = await channelSite(t);
  site.publish(release({ sequence: 1, version: VERSION, console: null }));
  const databaseUrl = await postgresUrl();
  const [idA, idB, percentage] = twoIds();
  t.ok(inRamp(idA, VERSION, percentage) && !inRamp(idB, VERSION, percentage), 'one in, one out');
  const a = await updateEngine(t, site, { databaseUrl, dataDir: dataDirWithId(t, idA) });
  const b = await updateEngine(t, site, { databaseUrl, dataDir: dataDirWithId(t, idB) });

  const ramp = await a.post(
    '/update/ramp',
    { percentage, dryRun: false },
    { 'x-engine-deploy-token': await a.deployToken() },
  );
  t.equal(ramp.status, 202, ramp.text);
  t.match(ramp.json(), { outcome: 'restarting', record: { shape: 'ramp', phase: 'ramping' } });
  t.equal(pointer(a.dataDir), join('releases', VERSION), 'the replica in the ramp moved');
  t.equal((await a.get('/update/status')).json().instanceId, idA);

  t.equal(await b.app.updates.reconcileReplica(), null, 'the replica outside the ramp stays');
  t.equal(pointer(b.dataDir), null);

  const settled = await a.post(
    '/update/ramp/settle',
    { verdict: 'alive' },
    { 'x-engine-deploy-token': await a.deployToken() },
  );
  t.equal(settled.status, 200, settled.text);
  t.match(settled.json(), { outcome: 'applied', record: { ramp: { percentage: 100 } } });

  const follow = await b.app.updates.reconcileReplica();
  t.match(follow, { outcome: 'restarting', message: /moves to 1\.4\.0/ }, 'the other replica follows');
  t.equal(pointer(b.dataDir), join('releases', VERSION), 'downloaded, uploaded and promoted');

  // A third replica joins after the channel moved on: it will not fetch a release the record's
  // document does not name.
  site.publish(release({ sequence: 2, version: '1.5.0', console: null }));
  const c = await updateEngine(t, site, { databaseUrl, dataDir: tempDir(t) });
  await t.rejects(c.app.updates.reconcileReplica(), { code: 'ERR_UPDATE_PROMOTE' });
  t.equal(pointer(c.dataDir), null, 'nothing moved');
});
