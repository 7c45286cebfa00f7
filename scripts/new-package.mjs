#!/usr/bin/env node
// Scaffolds a workspace package the way CONTRIBUTING.md describes, with the metadata the published
// packages carry (what `pnpm check:packages` requires of a tarball), run from the repository root:
//   node scripts/new-package.mjs packages/NAME [--private] [--dep @coffer/x ...]
//        [--description TEXT] [--keyword WORD ...]
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const usage =
  'usage: new-package.mjs packages/NAME|apps/NAME [--private] [--dep @coffer/x ...] ' +
  '[--description TEXT] [--keyword WORD ...] (the directory must not exist yet)';

const args = process.argv.slice(2);
const given = args[0];
const at = given === undefined ? '' : relative(root, resolve(given)).split(sep).join('/');
if (!/^(packages|apps)\/[a-z0-9][a-z0-9-]*$/.test(at) || existsSync(join(root, at))) {
  console.error(usage);
  process.exit(2);
}
const deps = [];
const keywords = ['coffer'];
let description = '';
for (let i = 1; i < args.length; i++) {
  const value = args[i + 1];
  if (args[i] === '--private') continue;
  if (!['--dep', '--keyword', '--description'].includes(args[i]) || value === undefined) {
    console.error(usage);
    process.exit(2);
  }
  if (args[i] === '--dep') deps.push(value);
  else if (args[i] === '--keyword') keywords.push(value);
  else description = value;
  i++;
}
const isPrivate = args.includes('--private');

/** Workspace package name -> its directory (`packages/x` or `apps/x`), for tsconfig references. */
const workspace = new Map(
  ['packages', 'apps'].flatMap((group) =>
    readdirSync(join(root, group))
      .filter((name) => existsSync(join(root, group, name, 'package.json')))
      .map((name) => [
        JSON.parse(readFileSync(join(root, group, name, 'package.json'), 'utf8')).name,
        `${group}/${name}`,
      ]),
  ),
);
const unknown = deps.filter((d) => !workspace.has(d));
if (unknown.length > 0) {
  console.error(`new-package.mjs: not a workspace package: ${unknown.join(', ')}`);
  process.exit(2);
}

const name = `@coffer/${basename(at)}`;
if (workspace.has(name)) {
  console.error(`new-package.mjs: ${name} already exists (${workspace.get(name)})`);
  process.exit(2);
}
// Repository, licence and Node.js range are the root package.json's, as check-packages.mjs compares.
const rootJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const web = rootJson.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
const exportsMap = { '.': { types: './dist/index.d.ts', default: './dist/index.js' } };
const scripts = {
  build: 'tsc -b',
  typecheck: 'tsc -p tsconfig.check.json',
  test: `node ../../scripts/test-all.mjs '${at}/test/**/*.test.ts'`,
};
const dependencies =
  deps.length === 0 ? {} : { dependencies: Object.fromEntries(deps.map((d) => [d, 'workspace:*'])) };
// Key order as in the published package.json files (packages/archive), so diffs stay small.
const pkg = isPrivate
  ? {
      name,
      version: '0.0.0',
      description,
      type: 'module',
      license: rootJson.license,
      private: true,
      engines: { node: rootJson.engines.node },
      exports: exportsMap,
      files: ['dist'],
      scripts,
      ...dependencies,
    }
  : {
      name,
      version: '0.0.0',
      description,
      keywords,
      homepage: `${web}/tree/main/${at}#readme`,
      bugs: { url: `${web}/issues` },
      repository: { type: 'git', url: rootJson.repository.url, directory: at },
      license: rootJson.license,
      type: 'module',
      engines: { node: rootJson.engines.node },
      exports: exportsMap,
      files: ['dist', '!dist/**/*.map', 'README.md', 'LICENSE', 'CHANGELOG.md'],
      scripts,
      ...dependencies,
    };

const dir = join(root, at);
mkdirSync(join(dir, 'src'), { recursive: true });
mkdirSync(join(dir, 'test'), { recursive: true });
writeFileSync(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
const refs = deps.map((d) => ({ path: `../../${workspace.get(d)}` }));
writeFileSync(
  join(dir, 'tsconfig.json'),
  `${JSON.stringify({ extends: '../../tsconfig.base.json', compilerOptions: { rootDir: 'src', outDir: 'dist' }, include: ['src'], references: refs }, null, 2)}\n`,
);
writeFileSync(
  join(dir, 'tsconfig.check.json'),
  `${JSON.stringify({ extends: '../../tsconfig.base.json', compilerOptions: { noEmit: true, composite: false, declaration: false, declarationMap: false, rootDir: '.' }, include: ['src', 'test'] }, null, 2)}\n`,
);
writeFileSync(join(dir, 'src', 'index.ts'), `/** ${name}: public surface. */\nexport {};\n`);
writeFileSync(join(dir, 'README.md'), `# ${name}\n\nWhat it owns, what it does not.\n`);
// The tarball's LICENSE must equal the repository's (check-packages.mjs).
if (!isPrivate) copyFileSync(join(root, 'LICENSE'), join(dir, 'LICENSE'));
console.log(`created ${at} (${name}${isPrivate ? ', private' : ''})`);
if (!isPrivate) {
  const todo = [
    description === '' ? 'a description (pnpm check:packages refuses an empty one)' : '',
    keywords.length === 1 ? 'keywords beyond "coffer"' : '',
    'a changeset naming it (pnpm changeset; the conventions test requires one until its first release)',
  ].filter((s) => s !== '');
  console.log(`before its first release it needs: ${todo.join('; ')}`);
}
