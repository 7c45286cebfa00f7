// scripts/check-deps.mjs: the repository passes; a tree with a package edge "up", an engine
// service importing a route, a room without a row, or recover importing @coffer/sources' main
// entry (drivers in the offline bundle) fails with a message naming the file.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t from 'tap';
import { repoRoot, tempDir } from '../src/index.ts';

const root = repoRoot();
const script = join(root, 'scripts', 'check-deps.mjs');
const run = (dir: string) => spawnSync(process.execPath, [script, dir], { encoding: 'utf8' });

function write(base: string, path: string, text: string): void {
  mkdirSync(dirname(join(base, path)), { recursive: true });
  writeFileSync(join(base, path), text);
}

t.test('the repository keeps both directions', async (t) => {
  const r = run(root);
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /dependency direction ok/);
});

t.test('violations are named, one line each', async (t) => {
  const dir = tempDir(t, 'check-deps-');
  write(
    dir,
    'packages/crypto/package.json',
    JSON.stringify({ name: '@coffer/crypto', dependencies: { '@coffer/archive': 'workspace:*' } }),
  );
  write(dir, 'packages/extra/package.json', JSON.stringify({ name: '@coffer/extra' }));
  write(dir, 'apps/engine/package.json', JSON.stringify({ name: '@coffer/engine' }));
  write(dir, 'apps/engine/src/routes/runs/index.ts', "import { x } from '../../runs/service.ts';\n");
  write(
    dir,
    'apps/engine/src/runs/service.ts',
    "import { y } from '../routes/runs/index.ts';\nexport const x = 1;\n",
  );
  write(dir, 'apps/engine/src/tasks/leased.ts', "const m = await import('../plugins/core.ts');\n");
  write(dir, 'apps/engine/src/plugins/core.ts', "import type { A } from '../app.ts';\n");
  write(dir, 'apps/engine/src/app.ts', "import '../routes/runs/index.ts';\n");
  write(dir, 'apps/engine/src/mystery/thing.ts', 'export {};\n');
  write(dir, 'apps/engine/src/stray.ts', 'export {};\n');
  write(dir, 'apps/recover/package.json', JSON.stringify({ name: '@coffer/recover' }));
  write(dir, 'apps/recover/src/extract.ts', "import { openSource } from '@coffer/sources';\n");
  write(dir, 'apps/recover/src/target.ts', "import { FilesWriter } from '@coffer/sources/files-writer';\n");
  const r = run(dir);
  t.equal(r.status, 1, 'fails');
  t.match(r.stderr, /@coffer\/crypto may not depend on @coffer\/archive/);
  t.match(r.stderr, /@coffer\/extra .* has no entry/);
  t.match(r.stderr, /@coffer\/restore has a row .* but no package/);
  t.match(
    r.stderr,
    /apps\/engine\/src\/runs\/service.ts \(runs\) may not import \.\.\/routes\/runs\/index.ts \(routes\)/,
  );
  t.match(
    r.stderr,
    /apps\/engine\/src\/tasks\/leased.ts \(tasks\) may not import \.\.\/plugins\/core.ts \(plugins\)/,
  );
  t.match(r.stderr, /apps\/engine\/src\/plugins\/core.ts \(plugins\) may not import \.\.\/app.ts \(root\)/);
  t.match(r.stderr, /room mystery\/ has no row/);
  t.match(r.stderr, /stray.ts is a top-level engine file in no room/);
  t.match(
    r.stderr,
    /apps\/recover\/src\/extract.ts imports @coffer\/sources; use only @coffer\/sources\/files-writer/,
  );
  t.notMatch(r.stderr, /target.ts imports/, 'the files writer entry is allowed');
  t.notMatch(
    r.stderr,
    /src\/routes\/runs\/index.ts \(routes\) may not/,
    'a route importing a service is allowed',
  );
  t.notMatch(r.stderr, /app.ts \(root\) may not/, 'the composition root imports anything');
});
