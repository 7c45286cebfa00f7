#!/usr/bin/env node
// Fails when a workspace package depends on another along an edge that ARCHITECTURE.md does not
// allow (dependency direction is one-way; nothing imports "up"). @coffer/testkit, the private
// test helpers, may be a devDependency of anything and a dependency of nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const allowed = {
  '@coffer/crypto': [],
  '@coffer/objectstore': [],
  '@coffer/authz': [],
  '@coffer/state': [],
  '@coffer/notify': [],
  '@coffer/testkit': [],
  '@coffer/sources': ['@coffer/objectstore'],
  '@coffer/audit': ['@coffer/crypto'],
  '@coffer/update': ['@coffer/crypto'],
  '@coffer/archive': ['@coffer/crypto', '@coffer/objectstore'],
  '@coffer/restore': ['@coffer/crypto', '@coffer/archive', '@coffer/objectstore', '@coffer/sources'],
  '@coffer/recover': ['@coffer/crypto', '@coffer/objectstore', '@coffer/archive'],
  '@coffer/engine': '*',
};
let bad = 0;
for (const top of ['packages', 'apps']) {
  for (const dir of readdirSync(top)) {
    const file = join(top, dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    const rule = allowed[pkg.name];
    if (rule === undefined) {
      console.error(
        `check-deps: ${pkg.name} (${file}) has no entry in scripts/check-deps.mjs; add its allowed edges`,
      );
      bad++;
      continue;
    }
    for (const [kind, deps] of [
      ['dependencies', pkg.dependencies],
      ['devDependencies', pkg.devDependencies],
    ]) {
      for (const dep of Object.keys(deps ?? {})) {
        if (!dep.startsWith('@coffer/')) continue;
        if (dep === '@coffer/testkit' && kind === 'devDependencies') continue;
        if (rule === '*' ? dep === '@coffer/engine' : !rule.includes(dep)) {
          console.error(`check-deps: ${pkg.name} may not depend on ${dep} (${kind}); see ARCHITECTURE.md`);
          bad++;
        }
      }
    }
  }
}
if (bad) process.exit(1);
console.log('check-deps: dependency direction ok');
