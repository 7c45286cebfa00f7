/**
 * End-to-end test stack: a real engine process (apps/engine/dist/main.js, SQLite in a temporary
 * data dir, the local-filesystem destination), the console server in this process proxying it,
 * and Debian's Chromium driven by playwright-core. Everything listens on loopback and is closed on
 * teardown. Browser personas get the DevTools virtual authenticator, so passkeys are real WebAuthn.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { chromiumPath, repoRoot, tempDir } from '@coffer/testkit';
import type { FastifyInstance } from 'fastify';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import type { Test } from 'tap';
import { buildConsole } from '../../src/server/app.ts';
import { loadConsoleConfig } from '../../src/server/config.ts';

type T = Test;

export const ADMIN_TOKEN = 'console-e2e-admin-token-0123456789';
export const ENGINE_MAIN = join(repoRoot(), 'apps', 'engine', 'dist', 'main.js');
export const RECOVER_CLI = join(repoRoot(), 'apps', 'recover', 'dist', 'cli.js');
/**
 * The built UI the tests serve: `dist/ui`, or CONSOLE_TEST_UI_DIR when set (a build made with
 * `vite build --outDir <dir>`, so two people working on screens at once do not share one build).
 */
export const UI_DIR = process.env.CONSOLE_TEST_UI_DIR ?? join(import.meta.dirname, '..', '..', 'dist', 'ui');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface Stack {
  /** The console's origin as the browser sees it (CONSOLE_ORIGIN). */
  origin: string;
  engineUrl: string;
  dataDir: string;
  /** Where the engine's restore targets may go (ENGINE_RESTORE_ROOTS). */
  restoreRoot: string;
  /** The break-glass secret key file (armoured) when the stack made one; null when set-up is left to the test. */
  breakGlassKeyFile: string | null;
  engineLogs: string[];
  /** The engine app when started with `inProcess`. */
  engine: FastifyInstance | null;
  console: FastifyInstance;
  browser: Browser;
  /** A browser identity of its own (cookies, virtual authenticator). */
  persona(options?: { width?: number; height?: number }): Promise<Persona>;
  /** Engine HTTP with the admin bearer (test set-up only; the UI never holds it). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read engine bodies of many shapes
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
}

export interface Persona {
  context: BrowserContext;
  page: Page;
  /** Console errors and CSP violations the page reported. */
  problems: string[];
}

export interface StackOptions {
  /** Leave the break-glass key unset (the set-up screen makes one). Default false. */
  withoutBreakGlassKey?: boolean;
  /**
   * Run the engine in this process (`startEngine` of @coffer/engine) instead of as a child, so a
   * test can reach its services (for example a session signed in ten minutes ago). Default false.
   */
  inProcess?: boolean;
  env?: Record<string, string>;
}

async function waitReady(url: string, child: ChildProcess, logs: string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`engine exited ${child.exitCode}: ${logs.join('').slice(-2000)}`);
    try {
      const r = await fetch(`${url}/ready`);
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`engine not ready: ${logs.join('').slice(-2000)}`);
}

export async function startStack(t: T, options: StackOptions = {}): Promise<Stack> {
  const dataDir = tempDir(t, 'coffer-console-e2e-');
  const restoreRoot = join(dataDir, 'restore-targets');
  mkdirSync(restoreRoot, { recursive: true });
  const consolePort = await freePort();
  const enginePort = await freePort();
  const origin = `http://localhost:${consolePort}`;
  const engineUrl = `http://127.0.0.1:${enginePort}`;
  let breakGlassKeyFile: string | null = null;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? dataDir,
    HOST: '127.0.0.1',
    PORT: String(enginePort),
    ENGINE_DATA_DIR: join(dataDir, 'engine'),
    ADMIN_TOKEN,
    CONSOLE_ORIGIN: origin,
    ENGINE_TRUST_PROXY: '127.0.0.1',
    ENGINE_RESTORE_ROOTS: restoreRoot,
    ENGINE_TICK_SECONDS: '5',
    ENGINE_LOG_LEVEL: 'info',
    HARNESS_TEST_FAULTS: '1',
    ...options.env,
  };
  if (!options.withoutBreakGlassKey) {
    const pair = generateRecipient();
    breakGlassKeyFile = join(dataDir, 'break-glass.key');
    writeFileSync(breakGlassKeyFile, encodeKeyFile('recipient-secret', pair.secretKey), { mode: 0o600 });
    env.ENGINE_BREAK_GLASS_PUBLIC_KEY = encodeKeyFile('recipient-public', pair.publicKey);
  }
  const logs: string[] = [];
  let engine: FastifyInstance | null = null;
  if (options.inProcess) {
    const { startEngine } = await import('@coffer/engine');
    engine = (await startEngine({ ...env, ENGINE_LOG_LEVEL: 'warn' })).app;
    const started = engine;
    t.teardown(() => started.close());
  } else {
    const child = spawn(process.execPath, [ENGINE_MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (c) => logs.push(String(c)));
    child.stderr?.on('data', (c) => logs.push(String(c)));
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
        }),
    );
    await waitReady(engineUrl, child, logs);
  }

  const app = await buildConsole({
    ...loadConsoleConfig({
      CONSOLE_ENGINE_URL: engineUrl,
      CONSOLE_UI_DIR: UI_DIR,
      CONSOLE_LOG_LEVEL: 'warn',
    }),
  });
  await app.listen({ host: '127.0.0.1', port: consolePort });
  t.teardown(() => app.close());

  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    args: ['--no-sandbox'],
    headless: true,
  });
  t.teardown(() => browser.close());

  return {
    origin,
    engineUrl,
    dataDir,
    restoreRoot,
    breakGlassKeyFile,
    engineLogs: logs,
    engine,
    console: app,
    browser,
    async persona({ width = 1280, height = 860 } = {}) {
      const context = await browser.newContext({ viewport: { width, height }, acceptDownloads: true });
      const page = await context.newPage();
      const cdp = await context.newCDPSession(page);
      await cdp.send('WebAuthn.enable');
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      });
      const problems: string[] = [];
      page.on('console', (m) => {
        // Expected failed loads (a 401 before sign-in, a refused write under test) are not problems.
        if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      return { context, page, problems };
    },
    async admin(method, path, body) {
      const r = await fetch(`${engineUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${ADMIN_TOKEN}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await r.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // text
      }
      return { status: r.status, body: parsed };
    },
  };
}

/**
 * Registers `email` as the first owner through the engine's bootstrap path from inside the page
 * (a real WebAuthn ceremony with the virtual authenticator), confirms the recovery codes and
 * leaves the page signed in on the console. For tests whose subject is another screen; the
 * set-up screen's own flow is tested in setup.test.ts.
 */
export async function signInFirstOwner(
  persona: Persona,
  stack: Stack,
  email = 'owner@example.org',
): Promise<void> {
  await persona.page.goto(`${stack.origin}/`);
  await registerInPage(persona.page, email, { authorization: `Bearer ${ADMIN_TOKEN}` });
  await persona.page.goto(`${stack.origin}/`);
  await persona.page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/**
 * Registers a passkey for `email` from inside the page with the given proof (bearer header, or an
 * invite token in `body`), then confirms the recovery codes. Returns the codes.
 */
export async function registerInPage(
  page: Page,
  email: string,
  headers: Record<string, string> = {},
  extra: Record<string, string> = {},
): Promise<string[]> {
  const result = await page.evaluate(
    async ([email, headers, extra]) => {
      const post = async (path: string, body: unknown, h: Record<string, string> = {}) => {
        const r = await fetch(path, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...h },
          body: JSON.stringify(body),
        });
        return { status: r.status, text: await r.text() };
      };
      const begin = await post('/admin/auth/register/begin', { email, ...extra }, headers);
      if (begin.status !== 200) return { error: `register/begin ${begin.status} ${begin.text}` };
      const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(JSON.parse(begin.text));
      const credential = (await navigator.credentials.create({ publicKey })) as PublicKeyCredential;
      const finish = await post('/admin/auth/register/finish', { credential: credential.toJSON() });
      if (finish.status !== 200) return { error: `register/finish ${finish.status} ${finish.text}` };
      const codes = JSON.parse(finish.text).recoveryCodes as string[];
      const confirm = await post('/admin/auth/recovery-codes/confirm', {});
      if (confirm.status !== 200) return { error: `confirm ${confirm.status} ${confirm.text}` };
      return { codes };
    },
    [email, headers, extra] as const,
  );
  if ('error' in result) throw new Error(result.error);
  return result.codes;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Runs axe-core on the page (evaluated through DevTools, so the console's CSP stays on) and
 * asserts no serious or critical violation; returns the violations for messages.
 */
export async function assertAccessible(t: T, page: Page, screen: string): Promise<void> {
  const loaded = await page.evaluate('typeof window.axe');
  if (loaded === 'undefined') await page.evaluate(axeSource);
  const violations = (await page.evaluate(async () => {
    const w = window as unknown as {
      axe: {
        run: (
          ctx: unknown,
          opts: unknown,
        ) => Promise<{
          violations: { id: string; impact: string; nodes: { target: string[] }[] }[];
        }>;
      };
    };
    const r = await w.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 3),
    }));
  })) as { id: string; impact: string; nodes: string[] }[];
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  t.same(serious, [], `axe: no serious violations on ${screen}`);
}

/** Saves a screenshot under docs/console/ when COFFER_SCREENSHOTS=1 (kept out of normal runs). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.COFFER_SCREENSHOTS !== '1') return;
  const dir = join(repoRoot(), 'docs', 'console');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}

/**
 * Starts a run of a freshly created job and returns its run id. A job that never ran is due at
 * once, so the engine's own tick (5 s here) may have started it first: the trigger then answers
 * 409 (`job has a run in flight`) and that run is the one to follow. The 409 names it when the
 * engine knows it; otherwise (the tick was still claiming) the job's newest run is it, whatever
 * its status by now, since a fresh job has no other run (a fast run may already be over).
 */
export async function triggerRun(stack: Stack, id: string): Promise<string> {
  const trig = await stack.admin('POST', '/admin/trigger', { id });
  if (trig.status === 200) return trig.body.runId as string;
  if (trig.status === 409 && trig.body?.error === 'job has a run in flight') {
    if (typeof trig.body.runId === 'string') return trig.body.runId;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const h = await stack.admin('GET', `/admin/history?id=${encodeURIComponent(id)}`);
      const runs = (h.body.runs ?? []) as { runId: string; startedAt?: string }[];
      if (runs[0] !== undefined) return runs[0].runId;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`trigger ${trig.status} ${JSON.stringify(trig.body)}`);
}
