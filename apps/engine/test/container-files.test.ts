// No container engine runs on the development machines, so the Dockerfile and compose.yaml are
// checked here for the properties a `docker build` from the repository root depends on: a
// multi-stage build on Node 24, a non-root runtime user, the pnpm that package.json pins, a
// build-context ignore file that keeps node_modules and the test servers' data out, and compose
// paths that point at files that exist (or that `pnpm start` writes); and the compose file's
// scale-out shape: two engine replicas sharing PostgreSQL, the S3-compatible store and one pair
// of key files made once by `coffer-engine keys init`, each with its own data volume.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';

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

t.test('compose.yaml: two engine replicas share PostgreSQL, MinIO and one pair of key files', async (t) => {
  // biome-ignore lint/suspicious/noExplicitAny: compose is untyped YAML
  const compose: any = parse(readFileSync(join(app, 'compose.yaml'), 'utf8'), { merge: true });
  const services = compose.services;
  const engines = Object.keys(services).filter((n) => /^engine-/.test(n));
  t.same(engines, ['engine-a', 'engine-b'], 'two engine replicas');
  const [a, b] = engines.map((n) => services[n]);
  t.same(a.environment, b.environment, 'the same settings on both (one anchor)');
  const env = a.environment;
  t.match(env.ENGINE_DATABASE_URL, /^postgres:\/\/[^@]+@postgres:5432\//, 'one PostgreSQL');
  t.match(
    env.ENGINE_DESTINATIONS,
    /^minio=s3:\/\/coffer-archives\/.*endpoint=http:\/\/minio:9000/,
    'one S3 store',
  );
  t.equal(env.ENGINE_DATA_DIR, '/data');

  const mounts = (svc: { volumes: string[] }) =>
    new Map(svc.volumes.map((v) => [v.split(':')[1], { volume: v.split(':')[0], mode: v.split(':')[2] }]));
  const [ma, mb] = [mounts(a), mounts(b)];
  t.not(ma.get('/data')?.volume, mb.get('/data')?.volume, 'each replica has its own data volume');
  for (const v of [ma.get('/data')?.volume, mb.get('/data')?.volume]) t.ok(v && v in compose.volumes);

  const keyDir = env.ENGINE_SIGNER_KEY_FILE.slice(0, env.ENGINE_SIGNER_KEY_FILE.lastIndexOf('/'));
  t.equal(
    env.ENGINE_OPERATIONAL_KEY_FILE.slice(0, keyDir.length + 1),
    `${keyDir}/`,
    'both key files in one dir',
  );
  for (const m of [ma, mb]) {
    t.equal(m.get(keyDir)?.mode, 'ro', 'the key volume is mounted read-only in the replicas');
    t.equal(m.get(keyDir)?.volume, ma.get(keyDir)?.volume, 'one key volume for both');
  }
  const init = services['keys-init'];
  t.ok(init, 'a one-shot keys-init service');
  t.same(mounts(init).get(keyDir)?.volume, ma.get(keyDir)?.volume, 'it writes the volume the replicas read');
  const script = init.entrypoint.join(' ');
  t.ok(
    script.includes(
      `keys init --signer ${env.ENGINE_SIGNER_KEY_FILE} --operational ${env.ENGINE_OPERATIONAL_KEY_FILE}`,
    ),
    'it runs coffer-engine keys init for exactly the files the replicas read',
  );
  t.match(script, /chown node:node/, 'the files belong to the image user that runs the engine');
  t.equal(init.network_mode, 'none', 'key generation needs no network');
  t.equal(init.image, a.image, 'the same image as the replicas');

  for (const [n, svc] of [
    ['engine-a', a],
    ['engine-b', b],
  ] as const) {
    t.equal(
      svc.depends_on['keys-init']?.condition,
      'service_completed_successfully',
      `${n} waits for the keys`,
    );
    t.equal(svc.depends_on.postgres?.condition, 'service_healthy', `${n} waits for PostgreSQL`);
    t.equal(
      svc.depends_on['minio-init']?.condition,
      'service_completed_successfully',
      `${n} waits for the bucket`,
    );
    t.ok(svc.networks.coffer.aliases.includes('engine'), `${n} answers to the name the console proxies`);
    t.ok(
      Number.parseInt(svc.stop_grace_period, 10) >= 60,
      `${n}: SIGTERM leaves time to checkpoint and hand over`,
    );
    t.same(svc.secrets, ['break_glass_pub']);
    for (const p of svc.ports) t.match(p, /^127\.0\.0\.1:/, `${n} publishes on loopback only`);
  }
  t.not(a.ports[0], b.ports[0], 'distinct host ports');
  t.same(services.console.depends_on, ['engine-a', 'engine-b'], 'the console starts after both replicas');
});
