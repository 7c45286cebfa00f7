// Workspace conventions that no single package owns (one public surface per package, changesets,
// and the import rule of ARCHITECTURE.md "Packages"), checked over every workspace package so a
// regression fails CI:
// - every changeset parses the way `changeset version` reads it, names published packages only,
//   and has a sentence; every published package has at least one changeset;
// - every package.json is ESM with an exports map whose conditions list `types` first, ships
//   `dist`, and supports Node 22.12 or later;
// - no source, test or script imports another package's src/ or dist/ by path;
// - no TODO or FIXME is left in a package's src/.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { repoRoot } from '../src/index.ts';

const root = repoRoot();

interface Pkg {
  dir: string;
  json: {
    name: string;
    private?: boolean;
    type?: string;
    exports?: Record<string, Record<string, string>>;
    files?: string[];
    engines?: { node?: string };
  };
}

const packages: Pkg[] = ['packages', 'apps'].flatMap((group) =>
  readdirSync(join(root, group))
    .map((name) => join(root, group, name))
    .filter((dir) => {
      try {
        return statSync(join(dir, 'package.json')).isFile();
      } catch {
        return false;
      }
    })
    .map((dir) => ({ dir, json: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) })),
);
const published = new Set(packages.filter((p) => p.json.private !== true).map((p) => p.json.name));

/** Files under `dir` (recursively) whose name matches `re`, skipping node_modules and dist. */
function files(dir: string, re: RegExp): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) return [];
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return files(p, re);
    return re.test(name) ? [p] : [];
  });
}

t.test('changesets parse, name published packages and carry a sentence', async (t) => {
  const dir = join(root, '.changeset');
  const sets = readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md');
  t.ok(sets.length > 0, 'there are changesets');
  const covered = new Set<string>();
  for (const f of sets) {
    const text = readFileSync(join(dir, f), 'utf8');
    const m = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(text);
    t.ok(m, `${f}: front matter between --- lines at the very top`);
    if (!m) continue;
    for (const line of m[1]!.split('\n').filter((l) => l.trim() !== '')) {
      const entry = /^"(@coffer\/[a-z0-9-]+)": (major|minor|patch)$/.exec(line.trim());
      t.ok(entry, `${f}: "${line}" is "<package>": major|minor|patch`);
      if (!entry) continue;
      t.ok(published.has(entry[1]!), `${f}: ${entry[1]} is a published workspace package`);
      covered.add(entry[1]!);
    }
    t.ok(m[2]!.trim().length > 20, `${f}: has a user-facing sentence`);
  }
  for (const name of published) t.ok(covered.has(name), `${name} has a changeset`);
});

t.test('package.json: ESM, exports map with types first, files dist, Node >=22.12', async (t) => {
  t.ok(packages.length >= 5, 'found the workspace packages');
  for (const { dir, json } of packages) {
    const at = relative(root, dir);
    t.equal(json.type, 'module', `${at}: type module`);
    const dot = json.exports?.['.'];
    t.ok(dot, `${at}: exports has "."`);
    if (dot) t.equal(Object.keys(dot)[0], 'types', `${at}: "types" is the first condition`);
    t.ok(json.files?.includes('dist'), `${at}: files ships dist`);
    const range = json.engines?.node ?? '';
    const min = /^>=(\d+)\.(\d+)/.exec(range);
    t.ok(
      min !== null && (Number(min[1]) > 22 || (Number(min[1]) === 22 && Number(min[2]) >= 12)),
      `${at}: engines.node ${range} is >=22.12 or narrower`,
    );
  }
});

t.test('no deep import into another package, no TODO or FIXME in src', async (t) => {
  const deep = /from\s+['"]@coffer\/[a-z0-9-]+\/(src|dist)\//;
  const code = /\.(ts|mts|mjs|js)$/;
  const scanned = [
    ...packages.flatMap((p) => [...files(join(p.dir, 'src'), code), ...files(join(p.dir, 'test'), code)]),
    ...files(join(root, 'scripts'), code),
    ...files(join(root, 'bench'), code),
  ];
  t.ok(scanned.length > 50, 'scanned the sources');
  const offenders = scanned.filter((f) => deep.test(readFileSync(f, 'utf8'))).map((f) => relative(root, f));
  t.same(offenders, [], 'no import of @coffer/<pkg>/src/... or /dist/...');
  const marker = new RegExp(`\\b(${['TO', 'DO'].join('')}|${['FIX', 'ME'].join('')})\\b`);
  const left = packages
    .flatMap((p) => files(join(p.dir, 'src'), code))
    .filter((f) => marker.test(readFileSync(f, 'utf8')))
    .map((f) => relative(root, f));
  t.same(left, [], 'no TODO/FIXME left in src/');
});
