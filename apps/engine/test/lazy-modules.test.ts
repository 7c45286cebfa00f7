// The engine loads the AWS SDK (S3 destinations and sources), ioredis (redis sources and drill
// targets) and the release unpacker's `tar` at their first use, not when it starts
// (docs/operations.md "Memory"): a real `node dist/main.js` with no S3 or Redis configured starts,
// backs up a files source and stops without resolving any of them. A resolve hook preloaded into
// the process (fixtures/resolve-log.mjs) logs every module it resolves; the control runs show the
// hook does see each of the three when something does import it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { BUILT_MAIN, startBuiltEngine } from './helpers/built-engine.ts';
import { bearer, http } from './helpers/engine.ts';

const HOOK = join(import.meta.dirname, 'fixtures', 'resolve-log.mjs');
const REPO = join(import.meta.dirname, '..', '..', '..');

/** The lazily loaded dependencies, by the specifier the code imports and by where pnpm puts them. */
const LAZY = [
  { name: '@aws-sdk/client-s3', specifier: /^@aws-sdk\//, path: /\/node_modules\/@aws-sdk\// },
  { name: 'ioredis', specifier: /^ioredis(\/|$)/, path: /\/node_modules\/ioredis\// },
  { name: 'tar', specifier: /^tar(\/|$)/, path: /\/node_modules\/tar\// },
];

/** The modules of `log` (specifier and resolved URL per line). */
function resolved(log: string): { specifier: string; url: string }[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [specifier, url] = l.split('\t');
      return { specifier: specifier!, url: url ?? '' };
    });
}

const loaded = (mods: { specifier: string; url: string }[], lazy: (typeof LAZY)[number]) =>
  mods.filter((m) => lazy.specifier.test(m.specifier) || lazy.path.test(m.url));

t.test('controls: the hook sees each of them when it is imported', async (t) => {
  const cases = [
    { lazy: LAZY[0]!, cwd: join(REPO, 'packages', 'objectstore') },
    { lazy: LAZY[1]!, cwd: join(REPO, 'packages', 'sources') },
    { lazy: LAZY[2]!, cwd: join(REPO, 'apps', 'engine') },
  ];
  for (const { lazy, cwd } of cases) {
    const log = join(tempDir(t), 'resolved.log');
    const r = spawnSync(
      process.execPath,
      ['--import', HOOK, '--input-type=module', '-e', `await import(${JSON.stringify(lazy.name)});`],
      { cwd, env: { PATH: process.env.PATH, COFFER_TEST_RESOLVE_LOG: log }, encoding: 'utf8' },
    );
    t.equal(r.status, 0, `${lazy.name} imports (${r.stderr.trim()})`);
    t.ok(loaded(resolved(log), lazy).length > 0, `the hook logged ${lazy.name}`);
  }
});

t.test(
  'an engine with no S3 or Redis starts, runs a files backup and stops without loading them',
  { skip: process.platform !== 'linux' },
  async (t) => {
    t.ok(existsSync(BUILT_MAIN), 'apps/engine/dist/main.js exists (run pnpm build first)');
    const dir = tempDir(t);
    const log = join(dir, 'resolved.log');
    writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
    const src = join(dir, 'src');
    mkdirSync(src);
    for (let i = 0; i < 5; i++) writeFileSync(join(src, `f${i}.txt`), `file ${i}\n`.repeat(100));
    const e = await startBuiltEngine(
      t,
      {
        ENGINE_DATA_DIR: join(dir, 'engine'),
        ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.pub'),
        COFFER_TEST_RESOLVE_LOG: log,
      },
      ['--import', HOOK],
    );
    const admin = (path: string, body?: unknown) =>
      http(`${e.url}/admin${path}`, { headers: bearer(), ...(body === undefined ? {} : { body }) });
    const job = await admin('/jobs', {
      id: 'lazy',
      cadenceSeconds: 86400,
      source: { type: 'files', path: src },
    });
    t.equal(job.status, 200, job.text);
    const trig = await admin('/trigger', { id: 'lazy' });
    t.equal(trig.status, 200, trig.text);
    let status = 'running';
    for (let i = 0; i < 600 && status === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const runs = (await admin('/history?id=lazy')).json().runs as { runId: string; status: string }[];
      status = runs.find((r) => r.runId === trig.json().runId)?.status ?? 'running';
    }
    t.equal(status, 'ok', 'the files backup ran, was read back and verified');
    e.child.kill('SIGTERM');
    t.equal(await e.exited, 0, 'graceful stop');

    const mods = resolved(log);
    t.ok(
      mods.some((m) => m.specifier === 'fastify') && mods.some((m) => m.specifier === '@coffer/archive'),
      `the hook saw the engine's own modules (${mods.length} resolved)`,
    );
    for (const lazy of LAZY) {
      const hits = loaded(mods, lazy);
      t.same(hits, [], `${lazy.name} was not loaded`);
    }
  },
);
