// Workspace conventions that no single package owns (one public surface per package, changesets,
// and the import rule of ARCHITECTURE.md "Packages"), checked over every workspace package so a
// regression fails CI:
// - every pending changeset parses the way `changeset version` reads it, names published packages
//   only, and has a sentence; a published package never released yet (no CHANGELOG.md) has one.
//   Right after a release `changeset version` has consumed them all, and none pending is fine;
// - every package.json is ESM with an exports map whose conditions list `types` first, ships
//   `dist`, and supports Node 22.12 or later;
// - no source, test or script imports another package's src/ or dist/ by path;
// - no TODO or FIXME is left in a package's src/.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
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

/**
 * What is wrong with one changeset file, read the way `changeset version` reads it (front matter
 * of `"<package>": <bump>` lines between `---` lines at the very top, then the summary), and the
 * packages it names. Empty `problems` when it is fine.
 */
function changesetProblems(file: string, text: string): { problems: string[]; packages: string[] } {
  const problems: string[] = [];
  const packages: string[] = [];
  const m = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/.exec(text);
  if (!m) return { problems: [`${file}: no front matter between --- lines at the very top`], packages };
  const lines = m[1]!.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) problems.push(`${file}: names no package`);
  for (const line of lines) {
    const entry = /^"(@coffer\/[a-z0-9-]+)": (major|minor|patch)$/.exec(line.trim());
    if (!entry) problems.push(`${file}: "${line}" is not "<package>": major|minor|patch`);
    else if (!published.has(entry[1]!))
      problems.push(`${file}: ${entry[1]} is not a published workspace package`);
    else packages.push(entry[1]!);
  }
  if (m[2]!.trim().length <= 20) problems.push(`${file}: has no user-facing sentence`);
  return { problems, packages };
}

t.test('pending changesets parse, name published packages and carry a sentence', async (t) => {
  const dir = join(root, '.changeset');
  const sets = readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md');
  if (sets.length === 0) t.pass('no pending changesets (right after a release)');
  const covered = new Set<string>();
  for (const f of sets) {
    const { problems, packages } = changesetProblems(f, readFileSync(join(dir, f), 'utf8'));
    t.same(problems, [], `${f}: parses, names published packages only, has a sentence`);
    for (const name of packages) covered.add(name);
  }
  // A package never released has no CHANGELOG.md: without a changeset the next cut would leave it
  // at 0.0.0, unpublishable. A released one needs a changeset only when it changed.
  for (const { dir: pkgDir, json } of packages) {
    if (json.private === true) continue;
    const released = existsSync(join(pkgDir, 'CHANGELOG.md'));
    t.ok(released || covered.has(json.name), `${json.name} is released or has a pending changeset`);
  }
});

t.test('the changeset check refuses what `changeset version` would misread', async (t) => {
  const good = '---\n"@coffer/archive": minor\n---\n\nA sentence a user of the package can read.\n';
  t.same(changesetProblems('good.md', good), { problems: [], packages: ['@coffer/archive'] });
  const bad: Record<string, string> = {
    'no front matter': 'A sentence a user of the package can read.\n',
    'single quotes': "---\n'@coffer/archive': minor\n---\n\nA sentence a user of the package can read.\n",
    'unknown bump': '---\n"@coffer/archive": huge\n---\n\nA sentence a user of the package can read.\n',
    'private package': '---\n"@coffer/testkit": patch\n---\n\nA sentence a user of the package can read.\n',
    'not a package': '---\n"@coffer/nowhere": patch\n---\n\nA sentence a user of the package can read.\n',
    'no package': '---\n\n---\n\nA sentence a user of the package can read.\n',
    'no sentence': '---\n"@coffer/archive": patch\n---\n\nFix.\n',
    'text above the front matter': '\n---\n"@coffer/archive": patch\n---\n\nA sentence a user can read.\n',
  };
  for (const [what, text] of Object.entries(bad)) {
    t.not(changesetProblems(`${what}.md`, text).problems.length, 0, `refused: ${what}`);
  }
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
