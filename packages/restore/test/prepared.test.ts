// applyRestore({ prepared }): the plan the caller gated with planFromIndex is written as it is,
// without computing it again; a plan from anywhere else is refused.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createFilesSource } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  type ApplyOptions,
  applyRestore,
  isRestoreError,
  planFromIndex,
  planRestore,
  validateRestoreRequest,
} from '../src/index.ts';
import { backup, fsStore, keys, resolverOf } from './helpers.ts';

const base = tempDir(t, 'restore-prepared-');
const src = join(base, 'src');
const roots = join(base, 'roots');
mkdirSync(roots);
mkdirSync(join(src, 'd'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'd', 'b.txt'), 'bravo\n');
const store = fsStore(join(base, 'dest'));
await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-p' }), {
  job: 'job-p',
  runId: 'run-p',
});
const resolver = resolverOf({ 'job-p': { type: 'files', root: src } });
const opts = (out: string): ApplyOptions => ({
  store,
  operationalSecretKey: keys().operational.secretKey,
  request: validateRestoreRequest({ runId: 'run-p', target: { namespaceId: out } }),
  targetResolver: resolver,
  restoreRoots: [roots],
});

/** The store, counting every object read. */
function counting(): { store: typeof store; gets: () => number } {
  let n = 0;
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop !== 'get' || typeof v !== 'function') return typeof v === 'function' ? v.bind(target) : v;
      return (...a: unknown[]) => {
        n++;
        return (v as (...x: unknown[]) => unknown).apply(target, a);
      };
    },
  });
  return { store: proxy, gets: () => n };
}

t.test('a prepared plan is applied without computing the plan again', async (t) => {
  const fresh = counting();
  const r1 = await applyRestore({ ...opts(join(roots, 'zero')), store: fresh.store });
  t.equal(r1.status, 'succeeded');
  const out = join(roots, 'one');
  const options = opts(out);
  const plan = await planFromIndex(options);
  t.equal(plan.ok, true);
  const reused = counting();
  const receipt = await applyRestore({ ...options, store: reused.store, prepared: plan });
  t.equal(receipt.status, 'succeeded');
  t.equal(receipt.planHash, plan.planHash);
  t.equal(receipt.written, 2);
  t.ok(
    reused.gets() < fresh.gets(),
    `fewer reads with the prepared plan (${reused.gets()} < ${fresh.gets()}): the manifest and index are not read again`,
  );
  t.equal(readFileSync(join(out, 'd', 'b.txt'), 'utf8'), 'bravo\n');
});

t.test('a reviewed hash that differs from the prepared plan is still refused', async (t) => {
  const out = join(roots, 'two');
  const options = opts(out);
  const plan = await planFromIndex(options);
  const wrong = `sha384:${'0'.repeat(96)}`;
  const e = await applyRestore({
    ...options,
    request: { ...options.request, planHash: wrong },
    prepared: plan,
  }).catch((x: unknown) => x);
  t.ok(isRestoreError(e, 'ERR_RESTORE_PLAN_CHANGED'), 'plan changed');
});

t.test('a plan that planFromIndex did not return is refused', async (t) => {
  const options = opts(join(roots, 'three'));
  const dry = await planRestore(options);
  const copy = { ...(await planFromIndex(options)) };
  for (const p of [dry, copy]) {
    const e = await applyRestore({ ...options, prepared: p }).catch((x: unknown) => x);
    t.ok(isRestoreError(e, 'ERR_RESTORE_INTERNAL'), 'refused');
  }
});
