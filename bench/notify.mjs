#!/usr/bin/env node
// Notification cost to a backup (`pnpm bench:notify`): a backup run through a started engine with
// no notification channel, beside the same run with a webhook channel whose receiver accepts the
// connection and never answers (every run's `backup-success` routed to it by a rule), interleaved
// in the same run. Delivery happens after the run settles, in the background, with a 5-second
// timeout per attempt and retries: the run itself must not wait for it. Reported: median wall
// seconds from trigger to the run's settled record, the engine process's CPU seconds over the
// round (from /proc), and the ratios with / without.
//
// Data: the shared benchmark data set (bench/archive-dataset.mjs) at BENCH_SCALE (default 0.1,
// ~100 MiB). Environment: BENCH_SCALE, BENCH_REPEAT (rounds, default 3), BENCH_NO_BUILD=1.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { createServer as netServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ensureDataSet } from './archive-dataset.mjs';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const scale = Number(env.BENCH_SCALE ?? 0.1);
const repeat = Number(env.BENCH_REPEAT ?? 3);
const TOKEN = 'bench-notify-admin-token-0123456789';

if (env.BENCH_NO_BUILD !== '1')
  execFileSync(
    'pnpm',
    [
      'turbo',
      'run',
      'build',
      '--filter=@coffer/engine...',
      '--filter=@coffer/testkit',
      '--output-logs=errors-only',
    ],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
const crypto = await import(pathToFileURL(join(root, 'packages', 'crypto', 'dist', 'index.js')).href);

console.log(`notify bench: ${availableParallelism()} CPUs, Node ${process.version}, scale ${scale}`);
for (const note of machineNotes()) console.log(note);
const data = ensureDataSet(scale);
console.log(`data set: ${data.files.length} files, ${(data.bytes / 2 ** 20).toFixed(0)} MiB`);

const work = mkdtempSync(join(tmpdir(), 'coffer-bench-notify-'));
// A test CA and a server certificate for localhost (@coffer/testkit's test PKI; the engine trusts
// the CA through ENGINE_NOTIFY_CA_FILE).
const { makeTestPki } = await import(
  pathToFileURL(join(root, 'packages', 'testkit', 'dist', 'index.js')).href
);
const pki = makeTestPki(work, { caName: 'bench CA' });

// The receiver that never answers.
let held = 0;
const silent = createServer({ cert: pki.cert, key: pki.key }, () => {
  held++;
});
await new Promise((r) => silent.listen(0, '127.0.0.1', r));
const hookUrl = `https://localhost:${silent.address().port}/never`;

const freePort = () =>
  new Promise((resolve) => {
    const s = netServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const pair = crypto.generateRecipient();
writeFileSync(join(work, 'bg.pub'), crypto.encodeKeyFile('recipient-public', pair.publicKey));

async function startEngine(name) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'apps', 'engine', 'dist', 'main.js')], {
    env: {
      PATH: env.PATH,
      HOST: '127.0.0.1',
      PORT: String(port),
      ENGINE_DATA_DIR: join(work, name),
      ADMIN_TOKEN: TOKEN,
      ENGINE_BREAK_GLASS_PUBLIC_KEY: join(work, 'bg.pub'),
      ENGINE_NOTIFY_CA_FILE: pki.caFile,
      ENGINE_LOG_LEVEL: 'warn',
    },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/ready`)).ok) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  const call = async (path, body) => {
    const r = await fetch(`${url}/admin${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  };
  await call('/jobs', { id: 'data', cadenceSeconds: 86400, source: { type: 'files', path: data.sourceDir } });
  return { child, call };
}

const cpuSeconds = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, clock ticks of 1/100 s
};

const plain = await startEngine('plain');
const notified = await startEngine('notified');
const ch = await notified.call('/notify/channels', {
  kind: 'webhook',
  name: 'never answers',
  url: hookUrl,
  allowPrivateTarget: true,
});
await notified.call('/notify/rules', {
  scope: 'global',
  minSeverity: 'info',
  events: ['backup-success', 'backup-failure'],
  channelIds: [ch.channel.id],
  digest: 'off',
});

async function oneRun(engine) {
  const cpu0 = cpuSeconds(engine.child.pid);
  const t0 = performance.now();
  const { runId } = await engine.call('/trigger', { id: 'data' });
  for (;;) {
    const h = await engine.call('/history?id=data');
    const run = h.runs.find((r) => r.runId === runId);
    if (run && run.status !== 'running' && run.status !== 'parked') {
      if (run.status !== 'ok') throw new Error(`run ${runId} ended ${run.status}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { wall: (performance.now() - t0) / 1000, cpu: cpuSeconds(engine.child.pid) - cpu0 };
}

const rows = { plain: [], notified: [] };
for (let i = 0; i < repeat; i++) {
  for (const which of i % 2 === 0 ? ['plain', 'notified'] : ['notified', 'plain']) {
    const r = await oneRun(which === 'plain' ? plain : notified);
    rows[which].push(r);
    console.log(
      `round ${i + 1} ${which.padEnd(8)} wall ${r.wall.toFixed(2)} s  engine CPU ${r.cpu.toFixed(2)} s`,
    );
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pw = median(rows.plain.map((r) => r.wall));
const nw = median(rows.notified.map((r) => r.wall));
const pc = median(rows.plain.map((r) => r.cpu));
const nc = median(rows.notified.map((r) => r.cpu));
console.log(
  `\nmedian of ${repeat}: no channel ${pw.toFixed(2)} s (CPU ${pc.toFixed(2)} s); with a channel that never answers ${nw.toFixed(2)} s (CPU ${nc.toFixed(2)} s)`,
);
console.log(
  `ratio with / without: ${(nw / pw).toFixed(2)} wall, ${(nc / pc).toFixed(2)} CPU (1.00 = the run does not wait for delivery); requests held by the silent receiver: ${held}`,
);

for (const e of [plain, notified]) e.child.kill('SIGTERM');
await Promise.all([plain, notified].map((e) => new Promise((r) => e.child.once('exit', r))));
silent.closeAllConnections();
silent.close();
rmSync(work, { recursive: true, force: true });
