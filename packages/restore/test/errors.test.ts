import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createFilesSource } from '@coffer/sources';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  applyRestore,
  approveRestore,
  attestRun,
  planRestore,
  RESTORE_ERROR_CODES,
  RESTORE_ERROR_STATUS,
  RestoreError,
  requestRestoreApproval,
  runDrill,
  validateRestoreRequest,
} from '../src/index.ts';
import { sqliteStores } from './approval-store.ts';
import { backup, fsStore, keys } from './helpers.ts';

t.test('docs/errors.md lists every @coffer/restore code with its status', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## @coffer/restore');
  t.ok(start >= 0, 'section exists');
  const rest = doc.slice(start + 3);
  const end = rest.search(/\n## /);
  const section = end === -1 ? rest : rest.slice(0, end);
  for (const code of RESTORE_ERROR_CODES) {
    t.match(section, `| \`${code}\` | ${RESTORE_ERROR_STATUS[code]} |`, `${code} documented`);
    t.equal(new RestoreError(code, 'x').status, RESTORE_ERROR_STATUS[code]);
  }
  const documented = [...section.matchAll(/\| `(ERR_RESTORE_[A-Z_]+)` \|/g)].map((m) => m[1]);
  t.same([...documented].sort(), [...RESTORE_ERROR_CODES].sort(), 'no stale codes');
});

t.test('a marker secret never appears in messages, plans, receipts, evidence or attestations', async (t) => {
  const MARKER = 'MARKER-SECRET-7f3a9c';
  const seen: string[] = [];
  const capture = async (p: Promise<unknown> | (() => unknown)) => {
    try {
      const v = typeof p === 'function' ? p() : await p;
      seen.push(JSON.stringify(v));
    } catch (e) {
      seen.push(String((e as Error).message), JSON.stringify(e), String((e as Error).stack));
    }
  };
  const base = tempDir(t, 'restore-marker-');
  const src = join(base, 'src');
  const roots = join(base, 'roots');
  mkdirSync(src);
  mkdirSync(roots);
  writeFileSync(join(src, 'secret.txt'), `password=${MARKER}\n`);
  const store = fsStore(join(base, 'dest'));
  await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-m' }), {
    job: 'job-m',
    runId: 'run-1',
  });
  const resolver = (b: string) =>
    b === 'job-m'
      ? { type: 'files' as const, root: src }
      : b === 'kv'
        ? { type: 'redis' as const, url: `redis://user:${MARKER}@127.0.0.1:1/0` }
        : null;

  for (const body of [
    { runId: 'r', cfConfig: { token: MARKER } },
    { runId: 'r', mediaRestore: { token: MARKER } },
    { runId: 'r', include: [MARKER, ''] },
    { runId: MARKER.repeat(20) },
    { runId: 'r', onExisting: MARKER },
    { runId: 'r', target: { [MARKER]: 'x' } },
  ])
    await capture(() => validateRestoreRequest(body));
  const base0 = {
    store,
    operationalSecretKey: keys().operational.secretKey,
    targetResolver: resolver,
    restoreRoots: [roots],
  };
  const req = (b: Record<string, unknown>) => validateRestoreRequest({ runId: 'run-1', ...b });
  await capture(planRestore({ ...base0, request: req({ target: { namespaceId: join(roots, 'o') } }) }));
  await capture(planRestore({ ...base0, request: req({ target: { binding: 'kv' } }) }));
  // The refusal of a target outside the roots (an apply's: a dry run answers the plan, whose
  // `target` is the path the caller gave) never echoes the path.
  await capture(
    applyRestore({ ...base0, request: req({ confirm: true, target: { namespaceId: `/tmp/${MARKER}` } }) }),
  );
  await capture(planRestore({ ...base0, request: req({ d1Tables: { database: 'x', tables: [MARKER] } }) }));
  await capture(
    planRestore({
      ...base0,
      operationalSecretKey: new TextEncoder().encode(MARKER),
      request: req({ target: { namespaceId: join(roots, 'o') } }),
    }),
  );
  await capture(
    applyRestore({ ...base0, request: req({ confirm: true, target: { namespaceId: join(roots, 'o') } }) }),
  );
  await capture(
    runDrill({
      store,
      runId: 'run-1',
      operationalSecretKey: keys().operational.secretKey,
      scratch: { dir: base },
    }),
  );
  await capture(attestRun(store, { runId: 'run-1' }));
  const stores = sqliteStores(join(base, 's.sqlite'), () => new Date());
  const plan = await planRestore({ ...base0, request: req({ target: { namespaceId: join(roots, 'o2') } }) });
  await capture(requestRestoreApproval({ ...stores, plan, requester: { subject: MARKER.slice(0, 3) } }));
  await capture(
    approveRestore({ approvals: stores.approvals, planHash: plan.planHash!, approver: { subject: null } }),
  );
  stores.close();
  t.ok(seen.length >= 15);
  const all = seen.join('\n');
  t.notOk(all.includes(MARKER), 'the marker never appears');
  t.ok(readFileSync(join(roots, 'o', 'secret.txt'), 'utf8').includes(MARKER), 'the data itself was restored');
});
