#!/usr/bin/env node
// Packaging check for every published workspace package (CONTRIBUTING.md "Releasing"), run in CI
// after the build: each package is packed with `pnpm pack` (as it would be published: workspace:
// ranges rewritten, `files` applied) and its tarball must
//   1. hold only what runs or is read: dist/**/*.js and *.d.ts, package.json, README.md, LICENSE,
//      CHANGELOG.md, plus the files a package ships on purpose (SHIPPED below); no tests,
//      fixtures, TypeScript sources, build info, or source maps whose sources are not in it;
//   2. hold every file its exports map and bin name, a LICENSE equal to the repository's, and a
//      package.json with the metadata a registry page needs (repository URL and licence as in the
//      root package.json, repository.directory its own), no workspace: range left and no
//      dependency on a private workspace package;
//   3. pass publint (no error or warning) and @arethetypeswrong/cli with the esm-only profile (the
//      packages are ESM only: a CommonJS `require` and node10 resolution are out of scope).
// Exits 1 with one line per problem, naming the package; 0 with a one-line summary per package.
//
// Usage: node scripts/check-packages.mjs [--keep DIR]   (--keep leaves the tarballs in DIR)
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Files a package ships beyond the allow-list, on purpose (path inside the package). */
const SHIPPED = {
  // The single-file air-gapped recovery tool and its digest (apps/recover README).
  '@coffer/recover': ['dist/coffer-recover.mjs', 'dist/coffer-recover.mjs.sha384'],
};

/** The root package.json names the repository and the licence every published package shares. */
const ROOT_JSON = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const ALWAYS = new Set(['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']);
const REQUIRED_FIELDS = ['description', 'keywords', 'homepage', 'bugs', 'repository', 'license', 'engines'];

/** Names of the workspace packages marked private: a published package must not depend on one. */
const PRIVATE = new Set(
  ['packages', 'apps']
    .flatMap((group) => readdirSync(join(root, group)).map((name) => join(root, group, name, 'package.json')))
    .filter((file) => existsSync(file))
    .map((file) => JSON.parse(readFileSync(file, 'utf8')))
    .filter((json) => json.private === true)
    .map((json) => json.name),
);

/** Every workspace package not marked private: `{ dir, name, json }`, sorted by directory. */
export function publishedPackages() {
  return ['packages', 'apps']
    .flatMap((group) => readdirSync(join(root, group)).map((name) => join(group, name)))
    .filter((dir) => {
      try {
        return JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')).private !== true;
      } catch {
        return false;
      }
    })
    .sort()
    .map((dir) => {
      const json = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
      return { dir, name: json.name, json };
    });
}

/**
 * Packs each package with `pnpm pack` into `dest` (so workspace: ranges become versions, as
 * `pnpm publish` does); resolves to a Map from package name to tarball path.
 */
export async function packPackages(pkgs, dest) {
  mkdirSync(dest, { recursive: true });
  const tarballs = new Map();
  await inParallel(pkgs, 3, async (p) => {
    const before = new Set(readdirSync(dest));
    const { code, out } = await run('pnpm', ['pack', '--pack-destination', dest], join(root, p.dir));
    if (code !== 0) throw new Error(`${p.name}: pnpm pack failed\n${out}`);
    const file = `${p.name.replace(/^@/, '').replace('/', '-')}-${p.json.version}.tgz`;
    if (before.has(file) || !readdirSync(dest).includes(file)) {
      throw new Error(`${p.name}: pnpm pack did not write ${file}`);
    }
    tarballs.set(p.name, join(dest, file));
  });
  return tarballs;
}

/** The regular files of a .tgz: Map from path (without the leading `package/`) to bytes. */
export function readTarball(file) {
  const tar = gunzipSync(readFileSync(file));
  const files = new Map();
  for (let at = 0; at + 512 <= tar.length; ) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const text = (from, len) =>
      header
        .subarray(from, from + len)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const size = Number.parseInt(text(124, 12).trim() || '0', 8);
    const prefix = text(345, 155);
    const name = prefix ? `${prefix}/${text(0, 100)}` : text(0, 100);
    const type = String.fromCharCode(header[156] || 48);
    if (type === '0') files.set(name.replace(/^package\//, ''), tar.subarray(at + 512, at + 512 + size));
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return files;
}

/** Problems with one tarball's file list and package.json (empty when it is fine). */
export function checkContents(p, files, license) {
  const problems = [];
  const shipped = new Set(SHIPPED[p.name] ?? []);
  for (const [path, bytes] of files) {
    if (ALWAYS.has(path) || shipped.has(path)) continue;
    if (/(^|\/)(test|tests|__tests__|fixtures?)\//.test(path)) problems.push(`${path}: test or fixture file`);
    else if (path.endsWith('.map')) {
      // A map is shipped only if every source it names is in the tarball too.
      let sources = [];
      try {
        sources = JSON.parse(bytes.toString('utf8')).sources ?? [];
      } catch {
        problems.push(`${path}: unreadable source map`);
      }
      for (const s of sources) {
        const target = posix.normalize(posix.join(posix.dirname(path), s));
        if (!files.has(target)) problems.push(`${path}: source map points outside the tarball (${s})`);
      }
    } else if (!/^dist\/.+(\.d\.ts|\.js)$/.test(path)) problems.push(`${path}: not on the allow-list`);
  }
  for (const need of ['README.md', 'LICENSE', 'package.json']) {
    if (!files.has(need)) problems.push(`${need} is missing from the tarball`);
  }
  if (files.has('LICENSE') && !files.get('LICENSE').equals(license)) {
    problems.push('LICENSE differs from the repository LICENSE');
  }
  for (const path of shipped) if (!files.has(path)) problems.push(`${path} (shipped on purpose) is missing`);

  const json = JSON.parse(files.get('package.json')?.toString('utf8') ?? '{}');
  for (const field of REQUIRED_FIELDS) {
    const v = json[field];
    if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0)) {
      problems.push(`package.json: "${field}" is missing or empty`);
    }
  }
  if (json.repository?.directory !== p.dir) {
    problems.push(`package.json: repository.directory is not "${p.dir}"`);
  }
  if (json.repository?.url !== ROOT_JSON.repository?.url) {
    problems.push(
      `package.json: repository.url is not the root package.json's (${ROOT_JSON.repository?.url})`,
    );
  }
  if (json.license !== ROOT_JSON.license) problems.push(`package.json: license is not ${ROOT_JSON.license}`);
  if (json.private === true) problems.push('package.json: marked private');
  const targets = [];
  const walk = (v) => {
    if (typeof v === 'string') targets.push(v);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(json.exports);
  walk(json.bin);
  if (targets.length === 0) problems.push('package.json: no exports');
  for (const target of targets) {
    if (!files.has(posix.normalize(target)))
      problems.push(`package.json names ${target}, not in the tarball`);
  }
  for (const kind of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    for (const [dep, range] of Object.entries(json[kind] ?? {})) {
      if (String(range).startsWith('workspace:')) problems.push(`${kind}.${dep} still reads ${range}`);
      if (PRIVATE.has(dep)) problems.push(`${kind}.${dep} is a private workspace package (never published)`);
    }
  }
  return problems;
}

export async function runPublint(tarball) {
  const { publint } = await import('publint');
  const { formatMessage } = await import('publint/utils');
  const bytes = readFileSync(tarball);
  const pkgJson = JSON.parse(readTarball(tarball).get('package.json').toString('utf8'));
  const { messages } = await publint({
    pack: { tarball: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) },
    level: 'warning',
  });
  return messages.map((m) => `publint ${m.type}: ${formatMessage(m, pkgJson) ?? m.code}`);
}

export async function runAttw(tarball) {
  const bin = join(root, 'node_modules', '.bin', 'attw');
  const args = [tarball, '--profile', 'esm-only', '--format', 'json', '--no-definitely-typed'];
  const { code, out } = await run(bin, args, root);
  if (code === 0) return [];
  try {
    const report = JSON.parse(out.slice(out.indexOf('{')));
    const problems = report.problems ?? report.analysis?.problems ?? [];
    // The JSON lists the problems of every resolution mode; the esm-only profile fails on these.
    const list = (Array.isArray(problems) ? problems : Object.values(problems).flat()).filter(
      (x) => !['node10', 'node16-cjs'].includes(x.resolutionKind),
    );
    if (list.length > 0) {
      return list.map(
        (x) =>
          `attw ${x.kind}${x.entrypoint ? ` (${x.entrypoint}${x.resolutionKind ? `, ${x.resolutionKind}` : ''})` : ''}`,
      );
    }
  } catch {
    // Not JSON: fall through to the raw output.
  }
  return [`attw failed (exit ${code}): ${out.trim().slice(0, 2000)}`];
}

function run(cmd, args, cwd) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
    });
    child.stderr.on('data', (c) => {
      out += c;
    });
    child.on('close', (code) => resolve({ code: code ?? 1, out }));
  });
}

async function inParallel(items, limit, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function main() {
  const started = Date.now();
  const keepAt = process.argv.indexOf('--keep');
  const dest = keepAt > 0 ? process.argv[keepAt + 1] : mkdtempSync(join(tmpdir(), 'coffer-pack-'));
  const pkgs = publishedPackages();
  const license = readFileSync(join(root, 'LICENSE'));
  const missing = pkgs.filter((p) => !existsSync(join(root, p.dir, 'dist')));
  if (missing.length > 0) {
    console.error(
      `check-packages: build first (pnpm build); no dist in ${missing.map((p) => p.dir).join(', ')}`,
    );
    process.exit(1);
  }
  let failed = 0;
  try {
    const tarballs = await packPackages(pkgs, dest);
    await inParallel(pkgs, 2, async (p) => {
      const tarball = tarballs.get(p.name);
      const files = readTarball(tarball);
      const problems = [
        ...checkContents(p, files, license),
        ...(await runPublint(tarball)),
        ...(await runAttw(tarball)),
      ];
      const size = readFileSync(tarball).length;
      if (problems.length === 0) {
        console.log(`ok   ${p.name}: ${files.size} files, ${(size / 1024).toFixed(0)} KiB packed`);
      } else {
        failed++;
        for (const problem of problems) console.log(`FAIL ${p.name}: ${problem}`);
      }
    });
  } finally {
    if (keepAt < 0) rmSync(dest, { recursive: true, force: true });
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`check-packages: ${pkgs.length - failed} of ${pkgs.length} packages pass (${secs} s)`);
  process.exit(failed > 0 ? 1 : 0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
