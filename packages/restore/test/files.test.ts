import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { createFilesSource } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  type ApplyOptions,
  applyRestore,
  planRestore,
  type RestoreError,
  validateRestoreRequest,
} from '../src/index.ts';
import { backup, fsStore, keys, resolverOf, sealNamed } from './helpers.ts';

const base = tempDir(t, 'restore-files-');
const src = join(base, 'src');
const roots = join(base, 'roots');
mkdirSync(roots);
const files: Record<string, Buffer> = {
  'a.txt': Buffer.from('alpha\n'),
  'dir/b.bin': randomBytes(300_000),
  'dir/sub/c.txt': Buffer.from('charlie'),
  'logs/x.log': Buffer.from('x'.repeat(5000)),
  'logs/y.log': Buffer.from('y'.repeat(7000)),
  empty: Buffer.alloc(0),
};
for (const [name, body] of Object.entries(files)) {
  mkdirSync(join(src, name, '..'), { recursive: true });
  writeFileSync(join(src, name), body, { mode: 0o640 });
}
const store = fsStore(join(base, 'dest'));
await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-files' }), {
  job: 'job-files',
  runId: 'run-1',
  shardSize: 64 * 1024,
});
const resolver = resolverOf({ 'job-files': { type: 'files', root: src } });

function opts(body: Record<string, unknown>, extra: Partial<ApplyOptions> = {}): ApplyOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request: validateRestoreRequest({ runId: 'run-1', ...body }),
    targetResolver: resolver,
    restoreRoots: [roots],
    ...extra,
  };
}

let n = 0;
function outDir(): string {
  return join(roots, `out-${++n}`);
}

function listTree(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...listTree(join(dir, e.name), `${prefix}${e.name}/`));
    else out.push(`${prefix}${e.name}`);
  }
  return out.sort();
}

t.test('dry run: every field, nothing written, then apply byte for byte', async (t) => {
  const out = outDir();
  const at = new Date('2030-01-02T03:04:05.678Z');
  const plan = await planRestore(opts({ target: { namespaceId: out } }, { now: () => at, isLatest: true }));
  t.equal(plan.ok, true);
  t.equal(plan.mode, 'dry-run');
  t.equal(plan.runId, 'run-1');
  t.equal(plan.job, 'job-files');
  t.equal(plan.isLatest, true);
  t.equal(plan.plannedWrites, 6);
  t.equal(plan.recordsVerified, 6);
  t.equal(
    plan.bytes,
    Object.values(files).reduce((a, b) => a + b.length, 0),
  );
  t.equal(plan.plannedAt, '2030-01-02T03:04:05.678Z');
  t.equal(plan.applyDeadline, '2030-01-03T03:34:05.678Z');
  t.equal(plan.sample.length, 6);
  t.same(Object.keys(plan.sample[0]!).sort(), [
    'binding',
    'name',
    'namespace',
    'plaintextSize',
    'sourceType',
  ]);
  t.same(plan.skipped, []);
  t.same(plan.dependencyWarnings, []);
  t.same(plan.fidelityWarnings, []);
  t.match(plan.overwriteCheck, {
    onExisting: 'overwrite',
    checked: 6,
    existing: 0,
    absent: 6,
    complete: true,
  });
  t.match(plan.planHash, /^sha384:[0-9a-f]{96}$/);
  t.equal(plan.target?.namespace, out);
  t.notOk(existsSync(out), 'a dry run writes nothing');

  const progress: string[] = [];
  const receipt = await applyRestore(
    opts(
      { target: { namespaceId: out }, confirm: true, planHash: plan.planHash },
      {
        onProgress: (p) => progress.push(`${p.phase}:${p.done}`),
        memoryStageBytes: 1024, // bigger records go through a staging file
      },
    ),
  );
  t.equal(receipt.status, 'succeeded');
  t.equal(receipt.written, 6);
  t.equal(receipt.recordsVerified, 6);
  t.equal(receipt.planHash, plan.planHash);
  t.equal(receipt.cancelled, false);
  t.ok(progress.includes('verify:6') && progress.includes('done:6'));
  t.same(listTree(out), Object.keys(files).sort());
  for (const [name, body] of Object.entries(files)) {
    t.ok(readFileSync(join(out, name)).equals(body), `${name} byte for byte`);
    t.equal(statSync(join(out, name)).mode & 0o777, 0o640, `${name} mode`);
  }
});

t.test('plan hash: stable over time and selector order; bound to what an apply writes', async (t) => {
  const out = outDir();
  const h = async (body: Record<string, unknown>, now?: Date) =>
    (await planRestore(opts({ target: { namespaceId: out }, ...body }, now ? { now: () => now } : {})))
      .planHash;
  const a = await h({ include: ['dir/', 'logs/'] });
  t.equal(
    await h({ include: ['logs/', 'dir/', 'logs/'] }, new Date(Date.now() + 3_600_000)),
    a,
    'order, repeats, time',
  );
  t.equal(await h({ include: ['logs/', 'dir/'], onExisting: 'overwrite' }), a, 'overwrite hashes as absent');
  t.not(await h({ include: ['dir/', 'logs/'], onExisting: 'skip' }), a, 'skip is bound');
  t.not(await h({ include: ['dir/'] }), a, 'selectors are bound');
  t.not(await h({ include: ['dir/', 'logs/'], maxRecords: 1 }), a, 'maxRecords is bound');
  t.not(await h({ include: ['dir/', 'logs/'], target: { namespaceId: outDir() } }), a, 'target is bound');
});

t.test('selectors', async (t) => {
  const out = outDir();
  const p1 = await planRestore(
    opts({ target: { namespaceId: out }, include: ['dir/', 'logs/'], exclude: ['dir/sub/', 'logs/y'] }),
  );
  t.same(
    p1.sample.map((r) => r.name),
    ['dir/b.bin', 'logs/x.log'],
    'exclude wins',
  );
  t.same(p1.skipped.map((s) => `${s.name}:${s.reason}`).sort(), [
    'a.txt:not included by selector',
    'dir/sub/c.txt:excluded by selector',
    'empty:not included by selector',
    'logs/y.log:excluded by selector',
  ]);
  t.equal(p1.skippedCount, 4);

  const p2 = await planRestore(
    opts({ target: { namespaceId: out }, recordName: 'dir/sub/c.txt', include: ['nothing/'] }),
  );
  t.same(
    p2.sample.map((r) => r.name),
    ['dir/sub/c.txt'],
    'recordName ignores include/exclude',
  );
  t.equal(p2.plannedWrites, 1);

  const p3 = await planRestore(opts({ target: { namespaceId: out }, recordName: 'dir/sub' }));
  t.equal(p3.ok, true);
  t.equal(p3.result, 'record-not-found');
  t.equal(p3.plannedWrites, 0);
  t.same(p3.sample, []);

  const p4 = await planRestore(opts({ target: { namespaceId: out }, maxRecords: 2 }));
  t.equal(p4.plannedWrites, 2);
  t.equal(p4.sample.length, 2);
  t.equal(p4.recordsVerified, 2);
  t.equal(p4.skipped.filter((s) => s.reason === 'beyond maxRecords').length, 4);

  const r = await applyRestore(
    opts({ target: { namespaceId: out }, recordName: 'dir/b.bin', confirm: true }),
  );
  t.equal(r.written, 1);
  t.same(listTree(out), ['dir/b.bin']);
});

t.test('posture that cannot read back is ok:false, never a throw', async (t) => {
  const noKey = await planRestore(opts({}, { operationalSecretKey: null }));
  t.equal(noKey.ok, false);
  t.match(noKey.reason, /no operational key/);
  t.equal(noKey.planHash, null);
  const missing = await planRestore({ ...opts({}), request: validateRestoreRequest({ runId: 'run-nope' }) });
  t.equal(missing.ok, false);
  t.equal(missing.reason, 'run not found');
  t.equal(missing.mode, 'dry-run');
  await t.rejects(
    applyRestore({ ...opts({}), request: validateRestoreRequest({ runId: 'run-nope', confirm: true }) }),
    {
      code: 'ERR_RESTORE_PLAN_UNAVAILABLE',
    },
  );
});

t.test('filesystem targets are confined to the restore roots', async (t) => {
  const outside = tempDir(t, 'restore-outside-');
  // The apply is refused; the dry run answers the plan with the refusal as an advisory.
  const refusedApply = async (body: Record<string, unknown>, extra: Partial<ApplyOptions> = {}) => {
    await t.rejects(applyRestore(opts({ ...body, confirm: true }, extra)), {
      code: 'ERR_RESTORE_OUTSIDE_ROOTS',
      status: 400,
    });
    const plan = await planRestore(opts(body, extra));
    t.equal(plan.ok, true);
    t.equal(plan.advisories.length, 1, JSON.stringify(body));
    t.equal(plan.advisories[0]?.code, 'ERR_RESTORE_OUTSIDE_ROOTS');
    t.equal(plan.overwriteCheck, null, 'a refused target is not looked at');
    t.match(plan.planHash, /^sha384:/);
    return plan;
  };
  await refusedApply({ target: { namespaceId: outside } });
  const own = await refusedApply({});
  t.equal(own.target?.namespace, src, 'the source itself is outside the roots');
  const link = join(roots, `link-${n++}`);
  symlinkSync(outside, link);
  await refusedApply({ target: { namespaceId: join(link, 'x') } });
  await refusedApply({ target: { namespaceId: join(roots, '..', 'x') } });
  const noRoots = await refusedApply({ target: { namespaceId: roots } }, { restoreRoots: [] });
  t.match(noRoots.advisories[0]?.message, /no restore roots are configured/);
  // The same target inside the roots hashes the same: the advisory is not part of the plan.
  const inside = await planRestore(opts({ target: { namespaceId: roots } }));
  t.same(inside.advisories, []);
  t.equal(inside.planHash, noRoots.planHash, 'the plan hash does not depend on the advisory');
  await t.rejects(planRestore(opts({ target: { binding: 'nope' } })), { code: 'ERR_RESTORE_UNKNOWN_TARGET' });
  await t.rejects(planRestore(opts({ target: { namespaceId: roots, bucketName: 'b' } })), {
    code: 'ERR_RESTORE_INVALID_REQUEST',
  });
  await t.rejects(planRestore(opts({ destinationId: 'other' })), { code: 'ERR_RESTORE_UNKNOWN_DESTINATION' });
  t.same(readdirSync(outside), [], 'nothing written outside');
});

t.test('a record name can never write outside its target', async (t) => {
  const outside = tempDir(t, 'restore-escape-');
  const estore = fsStore(join(base, 'dest-escape'));
  await sealNamed(estore, 'job-files', 'run-evil', 'files', 'job-files', [
    { name: '../escape.txt', body: Buffer.from('x') },
    { name: '/abs.txt', body: Buffer.from('x') },
    { name: 'ok/../../up.txt', body: Buffer.from('x') },
    { name: 'via-link/pwned.txt', body: Buffer.from('x') },
    { name: 'fine/ok.txt', body: Buffer.from('ok') },
  ]);
  const out = outDir();
  mkdirSync(out);
  symlinkSync(outside, join(out, 'via-link'));
  const o = {
    ...opts({}),
    store: estore,
    request: validateRestoreRequest({ runId: 'run-evil', target: { namespaceId: out } }),
  };
  const plan = await planRestore(o);
  t.same(
    plan.sample.map((r) => r.name),
    ['fine/ok.txt'],
  );
  const reasons = Object.fromEntries(plan.skipped.map((s) => [s.name, s.reason]));
  t.match(reasons['../escape.txt'], /'\.\.' segment/);
  t.match(reasons['/abs.txt'], /absolute/);
  t.match(reasons['ok/../../up.txt'], /'\.\.' segment/);
  t.match(reasons['via-link/pwned.txt'], /symbolic link/);
  const r = await applyRestore({ ...o, request: { ...o.request, confirm: true } });
  t.equal(r.status, 'succeeded');
  t.equal(r.written, 1);
  t.same(readdirSync(outside), [], 'nothing written through the link');
  t.notOk(existsSync(join(roots, 'escape.txt')));
  t.notOk(existsSync('/abs.txt'));
  t.equal(readFileSync(join(out, 'fine/ok.txt'), 'utf8'), 'ok');
});

t.test('onExisting skip keeps what is there and reports it', async (t) => {
  const out = outDir();
  mkdirSync(out);
  writeFileSync(join(out, 'a.txt'), 'mine');
  const plan = await planRestore(opts({ target: { namespaceId: out }, onExisting: 'skip' }));
  t.match(plan.overwriteCheck, { onExisting: 'skip', existing: 1, absent: 5 });
  const r = await applyRestore(opts({ target: { namespaceId: out }, onExisting: 'skip', confirm: true }));
  t.equal(r.status, 'succeeded');
  t.equal(r.written, 5);
  t.same(r.skipped, [{ name: 'a.txt', reason: 'exists in the target (onExisting: skip)' }]);
  t.equal(readFileSync(join(out, 'a.txt'), 'utf8'), 'mine');
  const again = await applyRestore(opts({ target: { namespaceId: out }, confirm: true }));
  t.equal(again.written, 6, 'overwrite (default) replaces');
  t.ok(readFileSync(join(out, 'a.txt')).equals(files['a.txt']!));
});

t.test('cancel stops further writes and leaves written records in place', async (t) => {
  const out = outDir();
  const ac = new AbortController();
  const r = await applyRestore(
    opts(
      { target: { namespaceId: out }, confirm: true },
      {
        signal: ac.signal,
        // One write at a time, so exactly one record is written before the cancel is seen (with
        // concurrent writes, the writes already started when the cancel came also finish).
        writeConcurrency: 1,
        onRecord: (o) => {
          if (o.outcome === 'written') ac.abort();
        },
      },
    ),
  );
  t.equal(r.status, 'cancelled');
  t.equal(r.cancelled, true);
  t.equal(r.written, 1);
  t.same(listTree(out), ['a.txt'], 'the written record stays');
  const resumed = await applyRestore(
    opts({ target: { namespaceId: out }, confirm: true }, { completed: ['a.txt'] }),
  );
  t.equal(resumed.alreadyDone, 1);
  t.equal(resumed.written, 5);
  t.same(listTree(out), Object.keys(files).sort());
});

t.test('a resumed skip apply rewrites a record it cut mid-write (mode 000), nothing else', async (t) => {
  // A record written straight to its name has mode 000 until its bytes are in; a crash leaves it
  // so. Without the clean-up, `onExisting: skip` would take the cut file for an existing one.
  const setUp = () => {
    const out = outDir();
    mkdirSync(join(out, 'logs'), { recursive: true });
    writeFileSync(join(out, 'a.txt'), 'cu', { mode: 0o000 }); // cut while written
    writeFileSync(join(out, 'logs/x.log'), 'mine'); // the operator's own
    writeFileSync(join(out, 'empty'), 'done earlier', { mode: 0o000 }); // recorded as written
    return out;
  };
  const resume = (out: string, firstStartedAt: string) =>
    applyRestore(
      opts(
        { target: { namespaceId: out }, onExisting: 'skip', confirm: true },
        { resuming: true, firstStartedAt, completed: ['empty'] },
      ),
    );
  const out = setUp();
  const r = await resume(out, new Date(Date.now() - 60_000).toISOString());
  t.equal(r.status, 'succeeded');
  t.ok(readFileSync(join(out, 'a.txt')).equals(files['a.txt']!), 'the cut record is written again');
  t.equal(statSync(join(out, 'a.txt')).mode & 0o777, 0o640, 'with its own mode');
  t.equal(readFileSync(join(out, 'logs/x.log'), 'utf8'), 'mine', 'the existing file stays');
  t.same(r.skipped, [{ name: 'logs/x.log', reason: 'exists in the target (onExisting: skip)' }]);
  t.equal(readFileSync(join(out, 'empty'), 'utf8'), 'done earlier', 'a completed record is not looked at');
  t.equal(r.written, 4);

  // A mode-000 file that was there before the apply began is the operator's: kept.
  const older = setUp();
  const kept = await resume(older, new Date(Date.now() + 60_000).toISOString());
  t.equal(readFileSync(join(older, 'a.txt'), 'utf8'), 'cu', 'older than the apply: kept');
  t.match(kept.skipped, [{ name: 'a.txt' }, { name: 'logs/x.log' }]);
});

t.test('apply refuses a plan other than the reviewed one', async (t) => {
  const out = outDir();
  const bogus = `sha384:${'0'.repeat(96)}`;
  const e = (await applyRestore(opts({ target: { namespaceId: out }, confirm: true, planHash: bogus })).catch(
    (x: unknown) => x,
  )) as RestoreError;
  t.equal(e.code, 'ERR_RESTORE_PLAN_CHANGED');
  t.equal(e.status, 409);
  t.match(e.planHash, /^sha384:/);
  t.notOk(existsSync(out));
});
