#!/usr/bin/env node
// Builds the engine's release artefact (docs/updates.md "Engine artefact"): the built engine
// (apps/engine/dist, run `pnpm build` first) bundled with its JavaScript dependencies into
// `engine/main.js` (plus the SQLite source's worker at `engine/internal/sqlite-worker.js`), the
// native SQLite addon beside it under `node_modules/better-sqlite3/`, packed as one gzip tarball.
// A release is platform-specific through that addon (its prebuilt binaries are N-API, so any
// Node >= 22.15 on the same OS and CPU runs it).
//
//   node apps/engine/scripts/build-release.mjs --out <dir> [--version <semver>]
//
// `--version` stamps another version into the bundle than package.json's (for a channel that
// ships a build under its own number, and for the two-version update tests). Prints one JSON line:
// { file, version, size, sha384 }.
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { create as createTar } from 'tar';

const here = import.meta.dirname;
const engineDir = resolve(here, '..');
const { values } = parseArgs({ options: { out: { type: 'string' }, version: { type: 'string' } } });
if (!values.out) {
  process.stderr.write('usage: build-release.mjs --out <dir> [--version <semver>]\n');
  process.exit(2);
}
const pkgVersion = JSON.parse(readFileSync(join(engineDir, 'package.json'), 'utf8')).version;
const version = values.version ?? pkgVersion;
if (!/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(version)) {
  process.stderr.write('build-release: --version must be a semantic version\n');
  process.exit(2);
}
const main = join(engineDir, 'dist', 'main.js');
if (!existsSync(main)) {
  process.stderr.write('build-release: apps/engine/dist/main.js is missing (run pnpm build)\n');
  process.exit(1);
}
// The SQLite source's worker is loaded by URL relative to the module (packages/sources), so it is
// a second entry point placed where the bundled main.js looks for it.
const requireFromSources = createRequire(join(engineDir, '..', '..', 'packages', 'sources', 'package.json'));
const sourcesDist = dirname(requireFromSources.resolve('@coffer/sources'));
const worker = join(sourcesDist, 'internal', 'sqlite-worker.js');

const staging = mkdtempSync(join(tmpdir(), 'coffer-release-'));
try {
  const versionFile = realpathSync(join(engineDir, 'dist', 'version.js'));
  await build({
    entryPoints: { 'engine/main': main, 'engine/internal/sqlite-worker': worker },
    outdir: staging,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    // Native and optional modules stay outside the bundle (the addon is copied below).
    external: ['better-sqlite3', 'pg-native', 'cpu-features', 'ssh2'],
    banner: {
      js: "import { createRequire as __cofferRequire } from 'node:module'; const require = __cofferRequire(import.meta.url);",
    },
    logLevel: 'error',
    legalComments: 'none',
    plugins: [
      {
        name: 'coffer-version',
        setup(b) {
          b.onLoad({ filter: /version\.js$/ }, (args) => {
            if (realpathSync(args.path) !== versionFile) return undefined;
            const text = readFileSync(args.path, 'utf8').replace(
              /ENGINE_VERSION = '[^']*'/,
              `ENGINE_VERSION = '${version}'`,
            );
            return { contents: text, loader: 'js' };
          });
        },
      },
    ],
  });
  // The native addon, without its C sources.
  const requireFromState = createRequire(join(engineDir, '..', '..', 'packages', 'state', 'package.json'));
  const sqliteDir = dirname(requireFromState.resolve('better-sqlite3/package.json'));
  const dest = join(staging, 'node_modules', 'better-sqlite3');
  mkdirSync(dest, { recursive: true });
  for (const part of ['package.json', 'LICENSE', 'lib', 'prebuilds', 'build/Release']) {
    const from = join(sqliteDir, part);
    if (!existsSync(from)) continue;
    cpSync(from, join(dest, part), {
      recursive: true,
      // This platform's prebuilt binary only (glibc and musl builds of this CPU on Linux).
      filter: (src) =>
        statSync(src).isDirectory() ||
        (!/\.(o|d|mk|a|stamp)$/.test(src) &&
          (!src.includes(`${join('prebuilds', '')}`) ||
            src.endsWith(`${process.platform}-${process.arch}.node`) ||
            src.endsWith(`${process.platform}musl-${process.arch}.node`))),
    });
  }
  mkdirSync(values.out, { recursive: true });
  const file = resolve(values.out, `engine-${version}.tgz`);
  await createTar({ gzip: { level: 9 }, file, cwd: staging, portable: true, noMtime: true }, [
    'engine',
    'node_modules',
  ]);
  const bytes = readFileSync(file);
  const sha384 = `sha384:${createHash('sha384').update(bytes).digest('hex')}`;
  process.stdout.write(`${JSON.stringify({ file, version, size: bytes.length, sha384 })}\n`);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
