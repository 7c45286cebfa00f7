#!/usr/bin/env node
// Scaffolds a workspace package the way CONTRIBUTING.md describes:
//   node scripts/new-package.mjs packages/NAME [--private] [--dep @coffer/x ...]
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const args = process.argv.slice(2);
const dir = args[0];
if (!dir || existsSync(dir)) {
  console.error('usage: new-package.mjs packages/NAME (must not exist yet)');
  process.exit(2);
}
const deps = [];
for (let i = 1; i < args.length; i++) if (args[i] === '--dep') deps.push(args[++i]);
const name = `@coffer/${basename(dir)}`;
mkdirSync(join(dir, 'src'), { recursive: true });
mkdirSync(join(dir, 'test'), { recursive: true });
const pkg = {
  name,
  version: '0.0.0',
  description: '',
  type: 'module',
  license: 'Apache-2.0',
  ...(args.includes('--private') ? { private: true } : {}),
  engines: { node: '>=22.12' },
  exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
  files: ['dist'],
  scripts: {
    build: 'tsc -b',
    typecheck: 'tsc -p tsconfig.check.json',
    test: `node ../../scripts/test-all.mjs '${dir}/test/**/*.test.ts'`,
  },
  dependencies: Object.fromEntries(deps.map((d) => [d, 'workspace:*'])),
};
writeFileSync(join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
const refs = deps.map((d) => ({
  path: `../../${d.startsWith('@coffer/') ? 'packages' : 'apps'}/${d.slice(8)}`,
}));
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
console.log(`created ${dir} (${name})`);
