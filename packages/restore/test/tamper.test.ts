import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layout } from '@coffer/archive';
import { createFilesSource } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  type ApplyOptions,
  applyRestore,
  planRestore,
  validateRestoreRequest,
  verifyRestore,
} from '../src/index.ts';
import { backup, fsStore, keys, resolverOf } from './helpers.ts';

const base = tempDir(t, 'restore-tamper-');
const src = join(base, 'src');
const roots = join(base, 'roots');
mkdirSync(roots);
mkdirSync(src);
const files: Record<string, Buffer> = {};
for (let i = 0; i < 8; i++) files[`f${i}.bin`] = randomBytes(40_000);
for (const [name, body] of Object.entries(files)) writeFileSync(join(src, name), body);

async function freshRun(runId: string) {
  const store = fsStore(join(base, `dest-${runId}`));
  await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-t' }), {
    job: 'job-t',
    runId,
    shardSize: 64 * 1024,
  });
  return store;
}

function opts(
  store: ApplyOptions['store'],
  runId: string,
  out: string,
  extra: Partial<ApplyOptions> = {},
): ApplyOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request: validateRestoreRequest({ runId, target: { namespaceId: out } }),
    targetResolver: resolverOf({ 'job-t': { type: 'files', root: src } }),
    restoreRoots: [roots],
    ...extra,
  };
}

function flip(root: string, key: string): void {
  const p = join(root, key);
  const b = readFileSync(p);
  b.writeUInt8(b.readUInt8(b.length - 20) ^ 0x01, b.length - 20);
  writeFileSync(p, b);
}

t.test('a shard tampered between dry run and apply aborts with zero written', async (t) => {
  const store = await freshRun('run-a');
  const out = join(roots, 'a');
  const plan = await planRestore(opts(store, 'run-a', out));
  t.equal(plan.ok, true);
  t.equal(plan.recordsVerified, 8);
  flip(join(base, 'dest-run-a'), layout.shard('job-t', 'run-a', 3));
  const r = await applyRestore(opts(store, 'run-a', out));
  t.equal(r.status, 'aborted');
  t.equal(r.written, 0);
  t.equal(r.failure?.phase, 'verify');
  t.equal(r.failure?.code, 'ERR_ARCHIVE_SHARD_TAMPERED');
  t.notOk(existsSync(out), 'zero written: the target was never created');
  const again = await planRestore(opts(store, 'run-a', out));
  t.equal(again.ok, false);
  t.match(again.reason, /record failed verification/);
  const v = await verifyRestore(opts(store, 'run-a', out));
  t.equal(v.ok, false);
  t.ok(v.recordsVerified < 8);
});

t.test('a shard tampered after phase one: phase two never writes unverified bytes', async (t) => {
  const store = await freshRun('run-b');
  const out = join(roots, 'b');
  let tampered = false;
  const r = await applyRestore(
    opts(store, 'run-b', out, {
      onProgress: (p) => {
        if (p.phase === 'verify' && p.done === p.total && !tampered) {
          tampered = true;
          flip(join(base, 'dest-run-b'), layout.shard('job-t', 'run-b', 3));
        }
      },
    }),
  );
  t.ok(tampered);
  t.equal(r.status, 'aborted');
  t.equal(r.recordsVerified, 8, 'phase one passed');
  t.equal(r.failure?.phase, 'write');
  t.ok(r.written > 0 && r.written < 8, `written before the bad shard: ${r.written}`);
  const names = readdirSync(out).sort();
  t.equal(names.length, r.written);
  for (const n of names) t.ok(readFileSync(join(out, n)).equals(files[n]!), `${n} holds verified bytes only`);
});

t.test('a missing manifest signature or index makes the plan ok:false', async (t) => {
  const store = await freshRun('run-c');
  await store.delete(layout.index('job-t', 'run-c'));
  const p = await planRestore(opts(store, 'run-c', join(roots, 'c')));
  t.equal(p.ok, false);
  t.match(p.reason, /run cannot be read back: record index missing/);
  await store.delete(layout.signature('job-t', 'run-c'));
  const q = await planRestore(opts(store, 'run-c', join(roots, 'c')));
  t.equal(q.ok, false);
  t.match(q.reason, /signature missing/);
});
