// No container engine runs on the development machines, so the Dockerfile and compose.yaml are
// checked here for the properties a `docker build` from the repository root depends on: a
// multi-stage build on Node 24, a non-root runtime user, the pnpm that package.json pins, a
// build-context ignore file that keeps node_modules and the test servers' data out, and compose
// paths that point at files that exist (or that `pnpm start` writes).
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import t from 'tap';

const app = join(import.meta.dirname, '..');
const root = join(app, '..', '..');
const dockerfile = readFileSync(join(app, 'Dockerfile'), 'utf8');
const lines = dockerfile.split('\n').filter((l) => !l.startsWith('#'));

t.test('Dockerfile: multi-stage on Node 24, non-root, pinned pnpm, frozen lockfile', async (t) => {
  const froms = lines.filter((l) => /^FROM /.test(l));
  t.ok(froms.length >= 2, 'at least two stages');
  for (const f of froms) t.match(f, /^FROM node:24[-.\w]* /, `Node 24 base: ${f}`);
  const users = lines.filter((l) => /^USER /.test(l));
  t.equal(users.at(-1), 'USER node', 'the runtime stage runs as the unprivileged node user');
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const pinned = /^pnpm@(\d+\.\d+\.\d+)$/.exec(pkg.packageManager)?.[1];
  t.ok(pinned, 'package.json pins pnpm');
  t.match(
    dockerfile,
    new RegExp(`pnpm@${pinned?.replaceAll('.', '\\.')}\\b`),
    'the image installs that pnpm',
  );
  t.match(dockerfile, /pnpm install --frozen-lockfile/);
  t.match(dockerfile, /deploy --prod/);
  t.match(dockerfile, /CMD \["node", "dist\/main\.js"\]/);
});

t.test('the build context ignore file keeps bulky and private paths out', async (t) => {
  const file = join(app, 'Dockerfile.dockerignore');
  t.ok(existsSync(file), 'Dockerfile.dockerignore beside the Dockerfile');
  const entries = readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  for (const must of [
    '**/node_modules',
    '**/dist',
    '.tools',
    '.test-services',
    '.coffer',
    '.coffer-operator',
  ])
    t.ok(entries.includes(must), `ignores ${must}`);
  t.notOk(entries.includes('pnpm-lock.yaml'), 'keeps the lockfile');
});

t.test('compose.yaml points at the Dockerfile, the quick start key and a destination', async (t) => {
  const compose = readFileSync(join(app, 'compose.yaml'), 'utf8');
  const context = /context: (\S+)/.exec(compose)?.[1];
  const file = /dockerfile: (\S+)/.exec(compose)?.[1];
  t.ok(context && file);
  t.equal(resolve(app, context!), resolve(root), 'context is the repository root');
  t.ok(existsSync(resolve(app, context!, file!)), 'dockerfile path exists from the context');
  const secret = /file: (\S+break-glass\.key\.pub)/.exec(compose)?.[1];
  t.equal(
    resolve(app, secret ?? ''),
    join(root, '.coffer-operator', 'break-glass.key.pub'),
    'the break-glass public key is where `pnpm start` writes it',
  );
  t.match(compose, /ENGINE_DESTINATIONS: minio=s3:\/\/coffer-archives\//, 'MinIO is a destination');
  t.match(compose, /mc mb --ignore-existing local\/coffer-archives/, 'and its bucket is created');
  t.notMatch(compose, /ENGINE_BREAK_GLASS_PUBLIC_KEY: .*\.key\s*$/m, 'never the secret half');
});

t.test('the console image and its place in compose.yaml', async (t) => {
  const consoleApp = join(root, 'apps', 'console');
  const file = readFileSync(join(consoleApp, 'Dockerfile'), 'utf8');
  const body = file.split('\n').filter((l) => !l.startsWith('#'));
  const froms = body.filter((l) => /^FROM /.test(l));
  t.ok(froms.length >= 2, 'multi-stage');
  for (const f of froms) t.match(f, /^FROM node:24[-.\w]* /, `Node 24 base: ${f}`);
  t.equal(body.filter((l) => /^USER /.test(l)).at(-1), 'USER node', 'runs as node');
  t.match(file, /pnpm install --frozen-lockfile/);
  t.match(file, /--filter @coffer\/console deploy --prod/);
  t.match(file, /CMD \["node", "dist\/server\/main\.js"\]/);
  const pkg = JSON.parse(readFileSync(join(consoleApp, 'package.json'), 'utf8'));
  t.equal(pkg.bin['coffer-console'], './dist/server/main.js', 'the CMD is the package bin');
  t.ok(pkg.files.includes('dist'), 'the deployed copy carries dist/ (server and UI)');
  t.ok(existsSync(join(consoleApp, 'Dockerfile.dockerignore')), 'its own context ignore file');

  const compose = readFileSync(join(app, 'compose.yaml'), 'utf8');
  t.match(compose, /dockerfile: apps\/console\/Dockerfile/, 'compose builds the console');
  t.match(compose, /CONSOLE_ENGINE_URL: http:\/\/engine:8787/, 'the console proxies the engine service');
  const ip = /ipv4_address: (\S+)/.exec(compose)?.[1];
  t.ok(ip, 'the console has a fixed address');
  t.match(
    compose,
    new RegExp(`ENGINE_TRUST_PROXY: ${ip?.replaceAll('.', '\\.')}\\b`),
    'the engine trusts only it',
  );
  t.match(
    compose,
    /CONSOLE_ORIGIN: \$\{CONSOLE_ORIGIN:-http:\/\/localhost:8788\}/,
    'passkeys bound to the console',
  );
});
