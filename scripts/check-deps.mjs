#!/usr/bin/env node
// Dependency direction, checked in CI (`pnpm lint`); ARCHITECTURE.md describes both tables.
//
// 1. Between workspace packages: a package may depend only on the packages its row allows
//    (one-way; nothing imports "up"). @coffer/testkit, the private test helpers, may be a
//    devDependency of anything and a dependency of nothing. Every workspace package needs a row,
//    and every row names a package that exists.
// 2. Inside the engine (apps/engine/src): each room (a top-level folder, or the foundation files)
//    may import only the rooms its row allows: routes -> plugins -> services -> foundation and
//    packages, never the reverse. A file's relative imports (`from './x.ts'`, `import('./x.ts')`)
//    are read with a regular expression: the rule is about where code lives, not about types.
//
// Usage: node scripts/check-deps.mjs [repository root]   (default: the current directory)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? '.');

const allowed = {
  '@coffer/crypto': [],
  '@coffer/objectstore': [],
  '@coffer/authz': [],
  '@coffer/identity': [],
  '@coffer/state': [],
  '@coffer/notify': [],
  '@coffer/testkit': [],
  '@coffer/sources': ['@coffer/objectstore'],
  '@coffer/audit': ['@coffer/crypto'],
  '@coffer/update': ['@coffer/crypto'],
  '@coffer/archive': ['@coffer/crypto', '@coffer/objectstore'],
  '@coffer/restore': ['@coffer/crypto', '@coffer/archive', '@coffer/objectstore', '@coffer/sources'],
  '@coffer/recover': ['@coffer/crypto', '@coffer/objectstore', '@coffer/archive', '@coffer/sources'],
  '@coffer/engine': '*',
  // The console's UI bundles the browser build of @coffer/crypto (the break-glass key is made in the
  // browser); its end-to-end tests start the engine and sign update channels (devDependencies only,
  // checked below).
  '@coffer/console': ['@coffer/crypto', '@coffer/engine', '@coffer/update'],
};

/**
 * Edges allowed only through the named entry points: coffer-recover is one offline file, and
 * @coffer/sources' main entry would carry the SQLite, Redis and S3 drivers into it; its files
 * writer imports only Node built-ins.
 */
const onlyThrough = {
  '@coffer/recover': { '@coffer/sources': ['@coffer/sources/files-writer'] },
};

/**
 * The engine's rooms and what each may import. `foundation` is the files at the top of src/ that
 * everything builds on; `root` is the composition root (app.ts builds the server from every room;
 * main.ts, start.ts, index.ts and openapi.ts start or describe it).
 */
const FOUNDATION = new Set([
  'config.ts',
  'errors.ts',
  'keys.ts',
  'version.ts',
  'context.ts',
  'node-flags.ts',
  // Which program runs (the installed one or a promoted release): loaded before anything else.
  'launcher.ts',
  // The engine's notification event bus (app.events): every room raises into it.
  'events.ts',
]);
// keys-init.ts: the `coffer-engine keys init` command main.ts dispatches to instead of an engine.
const ROOT = new Set(['app.ts', 'main.ts', 'start.ts', 'index.ts', 'openapi.ts', 'keys-init.ts']);
const engineRooms = {
  root: '*',
  routes: [
    'plugins',
    'config-changes',
    'control-plane',
    'posture',
    'reports',
    'canary',
    'updates',
    'sso',
    'notify',
    'restores',
    'drills',
    'runs',
    'jobs',
    'connections',
    'bundle',
    'metrics',
    'audit',
    'auth',
    'state',
    'foundation',
  ],
  plugins: [
    'canary',
    'updates',
    'sso',
    'notify',
    'restores',
    'drills',
    'runs',
    'jobs',
    'tasks',
    'connections',
    'audit',
    'auth',
    'state',
    'foundation',
  ],
  drills: ['restores', 'runs', 'jobs', 'tasks', 'connections', 'state', 'foundation'],
  restores: ['runs', 'jobs', 'tasks', 'connections', 'audit', 'state', 'foundation'],
  bundle: ['runs', 'jobs', 'state', 'foundation'],
  // Signed reports (docs/reports.md): reads the state store, drill evidence and the audit chain.
  reports: ['runs', 'jobs', 'state', 'foundation'],
  metrics: ['state', 'foundation'],
  // Notifications: @coffer/notify over the state store, subscribed to the event bus (events.ts).
  notify: ['state', 'foundation'],
  // Single sign-on: identity-provider connections over the settings store, @coffer/identity's protocols.
  sso: ['foundation'],
  // The update lifecycle: @coffer/update's machine over the state store's update_state table.
  updates: ['state', 'foundation'],
  // The integrity canary: @coffer/archive into each destination's `_canary/` namespace, flights in
  // the settings store, dead flights audited; flight ids are run ids.
  canary: ['runs', 'audit', 'state', 'foundation'],
  // Posture: the preflight's live probes (destinations through the canary's `_canary/` namespace),
  // the signed licence and the set-up acknowledgement; reports only, never a gate.
  posture: ['canary', 'runs', 'state', 'foundation'],
  // Control-plane recovery: export, secret scan, sealing, staging and apply over the state store.
  'control-plane': ['config-changes', 'runs', 'jobs', 'restores', 'connections', 'state', 'foundation'],
  // Configuration dual control and the signed config history: pending changes in the settings
  // store, the job write step, retention prunes re-planned on approval.
  'config-changes': ['runs', 'jobs', 'state', 'foundation'],
  runs: ['jobs', 'tasks', 'connections', 'state', 'foundation'],
  jobs: ['connections', 'foundation'],
  audit: ['auth', 'state', 'foundation'],
  auth: ['foundation'],
  state: ['foundation'],
  tasks: [],
  // config.ts parses ENGINE_CONNECTIONS_FILE through connections/config.ts.
  connections: ['foundation'],
  foundation: ['connections'],
};

let bad = 0;
const fail = (message) => {
  console.error(`check-deps: ${message}`);
  bad++;
};

// 1. Packages.
const names = new Set();
for (const top of ['packages', 'apps']) {
  if (!existsSync(join(root, top))) continue;
  for (const dir of readdirSync(join(root, top))) {
    const file = join(root, top, dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    names.add(pkg.name);
    const rule = allowed[pkg.name];
    if (rule === undefined) {
      fail(
        `${pkg.name} (${relative(root, file)}) has no entry in scripts/check-deps.mjs; add its allowed edges`,
      );
      continue;
    }
    for (const [kind, deps] of [
      ['dependencies', pkg.dependencies],
      ['devDependencies', pkg.devDependencies],
    ]) {
      for (const dep of Object.keys(deps ?? {})) {
        if (!dep.startsWith('@coffer/')) continue;
        if (dep === '@coffer/testkit' && kind === 'devDependencies') continue;
        if (
          pkg.name === '@coffer/console' &&
          (dep === '@coffer/engine' || dep === '@coffer/update') &&
          kind !== 'devDependencies'
        )
          fail(`@coffer/console may use ${dep} only in its tests (devDependencies)`);
        if (rule === '*' ? dep === '@coffer/engine' : !rule.includes(dep))
          fail(`${pkg.name} may not depend on ${dep} (${kind}); see ARCHITECTURE.md "Packages"`);
      }
    }
  }
}
for (const name of Object.keys(allowed))
  if (!names.has(name)) fail(`${name} has a row in scripts/check-deps.mjs but no package; remove the row`);

// 1b. Edges allowed only through named entry points (imports in the package's src/).
const PACKAGE_IMPORT = /(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"](@coffer\/[^'"]+)['"]/gm;
for (const top of ['packages', 'apps']) {
  if (!existsSync(join(root, top))) continue;
  for (const dir of readdirSync(join(root, top))) {
    const file = join(root, top, dir, 'package.json');
    const srcDir = join(root, top, dir, 'src');
    if (!existsSync(file) || !existsSync(srcDir)) continue;
    const limits = onlyThrough[JSON.parse(readFileSync(file, 'utf8')).name];
    if (limits === undefined) continue;
    for (const path of sources(srcDir)) {
      for (const m of readFileSync(path, 'utf8').matchAll(PACKAGE_IMPORT)) {
        const pkg = m[1].split('/').slice(0, 2).join('/');
        const entries = limits[pkg];
        if (entries !== undefined && !entries.includes(m[1]))
          fail(`${relative(root, path)} imports ${m[1]}; use only ${entries.join(', ')}`);
      }
    }
  }
}

// 2. The engine's rooms.
const src = join(root, 'apps', 'engine', 'src');
function roomOf(file) {
  const rel = relative(src, file).split(sep);
  if (rel.length === 1) return FOUNDATION.has(rel[0]) ? 'foundation' : ROOT.has(rel[0]) ? 'root' : null;
  return rel[0];
}
function* sources(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (name.endsWith('.ts')) yield path;
  }
}
const IMPORT = /(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
if (existsSync(src)) {
  for (const file of sources(src)) {
    const room = roomOf(file);
    const where = relative(root, file);
    if (room === null) {
      fail(
        `${where} is a top-level engine file in no room; add it to FOUNDATION or ROOT in scripts/check-deps.mjs`,
      );
      continue;
    }
    const rule = engineRooms[room];
    if (rule === undefined) {
      fail(
        `${where}: the engine room ${room}/ has no row in scripts/check-deps.mjs; add its allowed imports`,
      );
      continue;
    }
    if (rule === '*') continue;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), m[1]);
      if (!target.startsWith(src + sep)) {
        fail(`${where} imports ${m[1]}, outside the engine's src/`);
        continue;
      }
      const to = roomOf(target);
      if (to === room) continue;
      if (to === 'root' || to === null || !rule.includes(to))
        fail(
          `${where} (${room}) may not import ${m[1]} (${to ?? 'unknown'}); see ARCHITECTURE.md "Engine rooms"`,
        );
    }
  }
}

if (bad) process.exit(1);
console.log('check-deps: dependency direction ok (packages and engine rooms)');
