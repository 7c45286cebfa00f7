import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { routeSnapshot, snapshotText } from '../src/openapi.ts';

t.test('the committed route snapshot matches the route definitions', async (t) => {
  const snapshot = await routeSnapshot();
  const committed = readFileSync(join(import.meta.dirname, '..', 'openapi', 'engine.json'), 'utf8');
  t.equal(
    committed,
    snapshotText(snapshot),
    'openapi/engine.json is stale: run `pnpm --filter @coffer/engine build`',
  );
  const text = JSON.stringify(snapshot);
  t.notMatch(text, /"schema"|"components"|"requestBody"|"responses"/, 'no schemas in the snapshot');
  t.ok(snapshot.paths['/admin/jobs']?.post?.operationId === 'upsertJob');
  t.ok(snapshot.paths['/admin/jobs']?.get?.operationId === 'listJobs');
  for (const [path, methods] of Object.entries(snapshot.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      t.ok(
        op.operationId && op.summary && op.tags?.length,
        `${method} ${path} has operationId, summary, tags`,
      );
      t.notOk(['put', 'patch', 'delete'].includes(method) && path.startsWith('/admin'), `${method} ${path}`);
    }
  }
});

// `pnpm build` rewrites openapi/engine.json, so after a build the working-tree file always equals
// the routes; what can still be stale is the COMMITTED file (the one the console serves). In a git
// checkout the generated snapshot must therefore also equal the file as committed at HEAD.
t.test('the snapshot as committed (git HEAD) matches the route definitions', async (t) => {
  const repo = join(import.meta.dirname, '..', '..', '..');
  const shown = spawnSync('git', ['show', 'HEAD:apps/engine/openapi/engine.json'], {
    cwd: repo,
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (shown.status !== 0) {
    // Not a git checkout (an unpacked tarball): the working-tree comparison above is all there is.
    t.pass('no git history here; the working-tree snapshot was compared above');
    return;
  }
  t.equal(
    shown.stdout,
    snapshotText(await routeSnapshot()),
    'the committed openapi/engine.json is stale: build, then commit apps/engine/openapi/engine.json with the route change',
  );
});
