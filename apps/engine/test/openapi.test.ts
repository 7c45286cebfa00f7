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
