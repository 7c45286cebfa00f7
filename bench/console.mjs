#!/usr/bin/env node
// Console benchmark (`pnpm bench:console`): the built UI's size against its budget, and how fast
// the first screen is interactive on loopback, in Debian's Chromium.
//
// 1. Size: the files the first screen loads (index.html's entry script, its CSS and module
//    preloads) and every file under apps/console/dist/ui, raw, gzip -9 and brotli -11. The budget
//    (docs/console.md "Performance"): first screen at most 120 KiB gzip (JS + CSS), everything at
//    most 200 KiB gzip. Lazy chunks (the break-glass key generator) are outside the first screen.
// 2. First screen: a started engine (apps/engine/dist/main.js, temporary data dir) behind the
//    console server (apps/console/dist/server), each round a fresh browser context (cold cache):
//    from navigation to the sign-in form's email field enabled. The peer is a bare static page of
//    the same shape (one HTML file and one small script) served by node:http on loopback in the
//    same run, interleaved: the ratio console / peer is what the console adds over the browser's
//    own floor. Beside wall time: the renderer's main-thread task seconds (DevTools
//    Performance.getMetrics TaskDuration), the CPU the page cost. The 1 s target is reported,
//    never asserted.
//
// Environment: BENCH_REPEAT (rounds, default 7), BENCH_NO_BUILD=1 (skip building the console),
// CHROMIUM_PATH (default: scripts/services/chromium.sh's record, else /usr/bin/chromium).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { createServer as netServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const repeat = Number(env.BENCH_REPEAT ?? 7);
const BUDGET_FIRST_GZIP = 120 * 1024;
const BUDGET_TOTAL_GZIP = 200 * 1024;

if (env.BENCH_NO_BUILD !== '1') {
  execFileSync(
    'pnpm',
    ['turbo', 'run', 'build', '--filter=@coffer/console...', '--output-logs=errors-only'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
}
const uiDir = join(root, 'apps', 'console', 'dist', 'ui');
if (!existsSync(join(uiDir, 'index.html')))
  throw new Error('apps/console/dist/ui is not built: run pnpm build');

// ---- 1. Size -------------------------------------------------------------------------------------
const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
function sizes(file) {
  const data = readFileSync(file);
  return {
    raw: data.length,
    gzip: gzipSync(data, { level: 9 }).length,
    brotli: brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).length,
  };
}
const html = readFileSync(join(uiDir, 'index.html'), 'utf8');
const firstFiles = new Set(['index.html']);
for (const m of html.matchAll(/(?:src|href)="\/([^"]+\.(?:js|css))"/g)) firstFiles.add(m[1]);
const all = [];
(function walk(dir, rel) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, `${rel}${name}/`);
    else all.push(`${rel}${name}`);
  }
})(uiDir, '');
const sum = (files) =>
  files.reduce(
    (acc, f) => {
      const s = sizes(join(uiDir, f));
      return { raw: acc.raw + s.raw, gzip: acc.gzip + s.gzip, brotli: acc.brotli + s.brotli };
    },
    { raw: 0, gzip: 0, brotli: 0 },
  );
console.log(`console bench: ${availableParallelism()} CPUs, Node ${process.version}`);
for (const note of machineNotes()) console.log(note);
console.log('\nfiles (raw / gzip / brotli):');
for (const f of all.sort()) {
  const s = sizes(join(uiDir, f));
  console.log(
    `  ${firstFiles.has(f) ? '*' : ' '} ${f.padEnd(36)} ${kib(s.raw).padStart(10)} ${kib(s.gzip).padStart(10)} ${kib(s.brotli).padStart(10)}`,
  );
}
const first = sum([...firstFiles]);
const total = sum(all);
console.log('  (* = loaded by the first screen)');
console.log(
  `first screen: ${kib(first.raw)} raw, ${kib(first.gzip)} gzip, ${kib(first.brotli)} brotli; budget ${kib(BUDGET_FIRST_GZIP)} gzip: ${(first.gzip / BUDGET_FIRST_GZIP).toFixed(2)} of budget ${first.gzip <= BUDGET_FIRST_GZIP ? '(within)' : '(OVER)'}`,
);
console.log(
  `everything:   ${kib(total.raw)} raw, ${kib(total.gzip)} gzip, ${kib(total.brotli)} brotli; budget ${kib(BUDGET_TOTAL_GZIP)} gzip: ${(total.gzip / BUDGET_TOTAL_GZIP).toFixed(2)} of budget ${total.gzip <= BUDGET_TOTAL_GZIP ? '(within)' : '(OVER)'}`,
);

// ---- 2. First screen ------------------------------------------------------------------------------
const requireFromConsole = createRequire(join(root, 'apps', 'console', 'package.json'));
const playwright = await import(pathToFileURL(requireFromConsole.resolve('playwright-core')).href);
const chromium = playwright.chromium ?? playwright.default.chromium;
const { buildConsole, loadConsoleConfig } = await import(
  pathToFileURL(join(root, 'apps', 'console', 'dist', 'server', 'index.js')).href
);
const chromiumPath = (() => {
  if (env.CHROMIUM_PATH) return env.CHROMIUM_PATH;
  try {
    const rec = readFileSync(join(root, '.test-services', 'chromium.env'), 'utf8');
    const m = /CHROMIUM_PATH=(.+)/.exec(rec);
    if (m) return m[1].trim();
  } catch {}
  return '/usr/bin/chromium';
})();

const freePort = () =>
  new Promise((resolve) => {
    const s = netServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const dataDir = mkdtempSync(join(tmpdir(), 'coffer-bench-console-'));
const enginePort = await freePort();
const consolePort = await freePort();
const engine = spawn(process.execPath, [join(root, 'apps', 'engine', 'dist', 'main.js')], {
  env: {
    PATH: env.PATH,
    HOST: '127.0.0.1',
    PORT: String(enginePort),
    ENGINE_DATA_DIR: dataDir,
    ADMIN_TOKEN: 'bench-console-admin-token-0123456789',
    CONSOLE_ORIGIN: `http://localhost:${consolePort}`,
    ENGINE_LOG_LEVEL: 'warn',
  },
  stdio: 'ignore',
});
const engineUrl = `http://127.0.0.1:${enginePort}`;
for (let i = 0; i < 300; i++) {
  try {
    if ((await fetch(`${engineUrl}/ready`)).status === 200) break;
  } catch {}
  await new Promise((r) => setTimeout(r, 100));
}
const consoleApp = await buildConsole(
  loadConsoleConfig({ CONSOLE_ENGINE_URL: engineUrl, CONSOLE_UI_DIR: uiDir, CONSOLE_LOG_LEVEL: 'silent' }),
);
await consoleApp.listen({ host: '127.0.0.1', port: consolePort });

// The peer: a bare page of the same shape (HTML + one module script that renders one input).
const peerJs = `const i=document.createElement('input');i.id='email';i.type='email';document.body.append(i);`;
const peer = createServer((req, res) => {
  if (req.url === '/app.js') {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(peerJs);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(
    '<!doctype html><html lang="en"><title>peer</title><script type="module" src="/app.js"></script><body></body></html>',
  );
});
await new Promise((r) => peer.listen(0, '127.0.0.1', r));
const peerUrl = `http://localhost:${peer.address().port}/`;

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox'],
  headless: true,
});
async function measure(url, ready) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Performance.enable');
  const t0 = performance.now();
  await page.goto(url, { waitUntil: 'commit' });
  await page.locator(ready).waitFor({ state: 'visible' });
  await page.waitForFunction((sel) => !document.querySelector(sel)?.disabled, ready);
  const wall = performance.now() - t0;
  const metrics = (await cdp.send('Performance.getMetrics')).metrics;
  const task = metrics.find((m) => m.name === 'TaskDuration')?.value ?? Number.NaN;
  await context.close();
  return { wall, task };
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const rows = { console: [], peer: [] };
await measure(peerUrl, '#email'); // warm the browser process itself, not counted
for (let i = 0; i < repeat; i++) {
  const order = i % 2 === 0 ? ['console', 'peer'] : ['peer', 'console'];
  for (const which of order) {
    const r =
      which === 'console'
        ? await measure(`http://localhost:${consolePort}/`, 'input[type=email]')
        : await measure(peerUrl, '#email');
    rows[which].push(r);
    console.log(
      `round ${i + 1} ${which.padEnd(7)} wall ${r.wall.toFixed(0).padStart(5)} ms  renderer tasks ${(r.task * 1000).toFixed(0).padStart(5)} ms`,
    );
  }
}
const cw = median(rows.console.map((r) => r.wall));
const pw = median(rows.peer.map((r) => r.wall));
const ct = median(rows.console.map((r) => r.task));
const pt = median(rows.peer.map((r) => r.task));
console.log(
  `\nfirst screen interactive (median of ${repeat}, cold context): console ${cw.toFixed(0)} ms (renderer tasks ${(ct * 1000).toFixed(0)} ms), bare peer page ${pw.toFixed(0)} ms (${(pt * 1000).toFixed(0)} ms)`,
);
console.log(
  `ratio console / peer: ${(cw / pw).toFixed(2)} wall, ${(ct / pt).toFixed(2)} renderer tasks; target 1000 ms: ${(cw / 1000).toFixed(2)} of target ${cw <= 1000 ? '(within)' : '(OVER)'}`,
);

await browser.close();
await consoleApp.close();
peer.close();
engine.kill('SIGTERM');
await new Promise((r) => engine.once('exit', r));
rmSync(dataDir, { recursive: true, force: true });
