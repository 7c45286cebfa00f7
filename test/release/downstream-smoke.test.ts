/**
 * Downstream smoke test of the published packages (issue #22), as a new user meets them: the
 * packages are packed with `pnpm pack` (workspace: ranges become versions, `files` applies), and
 * the tarballs are installed with plain npm into a fresh project in the system temp directory,
 * outside the workspace (no pnpm, no workspace links, no npm_config_* inherited from a pnpm run).
 * From there:
 *   (a) the "Read an archive in ten lines" example, copied verbatim from packages/archive/README.md,
 *       verifies and lists copies of the golden archives (0.1 and 0.2) with the break-glass key
 *       file, and the digests it prints are the SHA-384 of the golden inputs;
 *   (b) `coffer-recover` from node_modules/.bin (and the air-gapped bundle the package ships)
 *       inspects, verifies and extracts the golden run, and refuses a wrong signer pin with its
 *       documented exit code;
 *   (c) a browser entry importing @coffer/crypto is bundled by esbuild for the browser (a Node
 *       built-in in the graph fails the build) and run in Chromium: it seals and opens a message,
 *       and Node, with the installed package, opens the capsule the browser sealed.
 * The tarballs need the built dist of each package: without it the test skips, saying so. npm
 * installs the third-party dependencies from the registry as it would for a user (none of them
 * runs an install script today: better-sqlite3 ships its prebuilt binaries in its tarball).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromiumPath, tempDir } from '@coffer/testkit';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import t from 'tap';
import { goldenRecords } from '../../packages/archive/test/golden-inputs.ts';
import { packPackages, publishedPackages, readTarball } from '../../scripts/check-packages.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const fixtures = join(root, 'packages', 'archive', 'test', 'fixtures');
/** What a user installs; their @coffer dependencies are added from the packed tarballs below. */
const WANTED = ['@coffer/archive', '@coffer/objectstore', '@coffer/crypto', '@coffer/recover'];

const all = publishedPackages();
// What is wanted and its @coffer dependencies, each from its packed tarball (npm would otherwise
// look the dependencies up in the registry).
const needed = new Set<string>();
const add = (name: string) => {
  if (needed.has(name)) return;
  needed.add(name);
  const json = all.find((p) => p.name === name)!.json as { dependencies?: Record<string, string> };
  for (const dep of Object.keys(json.dependencies ?? {})) if (dep.startsWith('@coffer/')) add(dep);
};
WANTED.forEach(add);
const unbuilt = all.filter((p) => needed.has(p.name) && !existsSync(join(root, p.dir, 'dist', 'index.js')));
if (unbuilt.length > 0) {
  t.plan(0, `needs the built packages (pnpm build): no dist in ${unbuilt.map((p) => p.dir).join(', ')}`);
} else {
  await smoke();
}

/** The environment of a plain npm user: nothing pnpm or a package script put in it. */
function plainEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(npm_|pnpm_|PNPM_|NODE_OPTIONS$|NODE_PATH$|TAP)/i.test(k)) env[k] = v;
  }
  return env;
}

function sh(cmd: string, args: string[], cwd: string) {
  const r = spawnSync(cmd, args, { cwd, env: plainEnv(), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The signer fingerprint to pin, from the fixture's own key file (not from the bucket it checks). */
function signerPin(fixture: 'golden-0.1' | 'golden-0.2'): string {
  const text = readFileSync(join(fixtures, fixture, 'keys', 'signer.pub'), 'utf8');
  return /^Fingerprint: (sha384:[0-9a-f]{96})$/m.exec(text)![1]!;
}

function sha384(bytes: Uint8Array): string {
  return `sha384:${createHash('sha384').update(bytes).digest('hex')}`;
}

async function smoke(): Promise<void> {
  const work = tempDir(t, 'coffer-downstream-');
  const project = join(work, 'project');
  mkdirSync(project);

  const tarballs = await packPackages(
    all.filter((p) => needed.has(p.name)),
    join(work, 'tarballs'),
  );
  for (const name of needed) {
    const json = JSON.parse(readTarball(tarballs.get(name)!).get('package.json')!.toString('utf8'));
    const ranges = Object.values(json.dependencies ?? {}) as string[];
    t.notOk(
      ranges.some((r) => r.startsWith('workspace:')),
      `${name}: no workspace: range in the packed package.json`,
    );
  }

  const init = sh('npm', ['init', '-y'], project);
  t.equal(init.status, 0, `npm init: ${init.stderr}`);
  const install = sh(
    'npm',
    ['install', '--no-audit', '--no-fund', ...[...needed].map((n) => tarballs.get(n)!)],
    project,
  );
  t.equal(install.status, 0, `npm install of the tarballs: ${install.stderr.slice(-2000)}`);
  t.notOk(existsSync(join(project, 'pnpm-lock.yaml')), 'a plain npm project');
  t.ok(existsSync(join(project, 'package-lock.json')), 'npm wrote its lock file');
  for (const name of needed) {
    const installed = join(project, 'node_modules', name);
    t.ok(existsSync(join(installed, 'LICENSE')), `${name} installed with its LICENSE`);
    t.notOk(existsSync(join(installed, 'src')), `${name} installed without its sources`);
  }

  await t.test('(a) the README example reads and verifies the golden archives', async (t) => {
    const readme = readFileSync(join(root, 'packages', 'archive', 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Read an archive in ten lines'));
    const example = /```js\n([\s\S]*?)```/.exec(section)?.[1];
    t.ok(example, 'the README has the example');
    writeFileSync(join(project, 'read-archive.mjs'), example!);

    const bucket01 = join(work, 'bucket-0.1');
    cpSync(join(fixtures, 'golden-0.1', 'store'), bucket01, { recursive: true });
    const key01 = join(fixtures, 'golden-0.1', 'keys', 'break-glass.key');
    const r = sh('node', ['read-archive.mjs', bucket01, key01, signerPin('golden-0.1')], project);
    t.equal(r.status, 0, `the example runs: ${r.stderr}`);
    const lines = r.stdout.trim().split('\n');
    for (const run of [1, 2]) {
      const runId = `run-000${run}`;
      const expected = goldenRecords(run).map(
        (rec) => `${runId} ${sha384(rec.body as Uint8Array)} ${(rec.body as Uint8Array).length} ${rec.name}`,
      );
      t.same(
        lines.filter((l) => l.startsWith(`${runId} `)),
        expected,
        `${runId}: every record, with the SHA-384 of its golden input`,
      );
      const total = expected.length;
      const bytes = goldenRecords(run).reduce((n, rec) => n + (rec.body as Uint8Array).length, 0);
      t.ok(lines.includes(`golden/${runId}: ${total} records, ${bytes} bytes verified`), `${runId} verified`);
    }

    const bucket02 = join(work, 'bucket-0.2');
    cpSync(join(fixtures, 'golden-0.2', 'store'), bucket02, { recursive: true });
    const key02 = join(fixtures, 'golden-0.2', 'keys', 'break-glass.key');
    const r2 = sh('node', ['read-archive.mjs', bucket02, key02, signerPin('golden-0.2')], project);
    t.equal(r2.status, 0, `0.2 (incremental) runs read too: ${r2.stderr}`);
    const verified = r2.stdout.split('\n').filter((l) => / records, \d+ bytes verified$/.test(l));
    t.ok(verified.length >= 2, `every 0.2 run verified: ${verified.join('; ')}`);

    const wrongPin = sh('node', ['read-archive.mjs', bucket01, key01, `sha384:${'0'.repeat(96)}`], project);
    t.not(wrongPin.status, 0, 'another signer pin is refused');
    t.match(wrongPin.stderr, /ERR_ARCHIVE_SIGNER_NOT_PINNED/);
  });

  await t.test('(b) coffer-recover from the installed bin', async (t) => {
    const bucket = join(work, 'bucket-recover');
    cpSync(join(fixtures, 'golden-0.1', 'store'), bucket, { recursive: true });
    const key = join(work, 'break-glass.key');
    cpSync(join(fixtures, 'golden-0.1', 'keys', 'break-glass.key'), key);
    const pin = signerPin('golden-0.1');
    const bin = join(project, 'node_modules', '.bin', 'coffer-recover');
    t.ok(existsSync(bin), 'npm linked the coffer-recover bin');

    const version = sh(bin, ['version', '--json'], project);
    const recoverVersion = all.find((p) => p.name === '@coffer/recover')!.json.version;
    t.equal(JSON.parse(version.stdout).version, recoverVersion, 'it reports the installed version');

    const inspect = sh(bin, ['inspect', '--from', bucket, '--json'], project);
    t.equal(inspect.status, 0, inspect.stderr);
    const listing = JSON.parse(inspect.stdout);
    t.same(
      listing.runs.map((r: { runId: string; records: number }) => [r.runId, r.records]),
      [
        ['run-0001', 7],
        ['run-0002', 7],
      ],
    );
    t.equal(listing.recovery.signer, pin);

    const verify = sh(
      bin,
      ['verify', '--from', bucket, '--run', 'run-0002', '--key', key, '--pin-signer', pin, '--json'],
      project,
    );
    t.equal(verify.status, 0, verify.stderr);
    const verdict = JSON.parse(verify.stdout).verdict;
    t.same(
      { ok: verdict.ok, pinned: verdict.checks.signerPinned, records: verdict.checks.records },
      { ok: true, pinned: true, records: 7 },
    );

    const to = join(work, 'extracted');
    const extract = sh(
      bin,
      [
        'extract',
        '--from',
        bucket,
        '--run',
        'run-0002',
        '--key',
        key,
        '--to',
        to,
        '--pin-signer',
        pin,
        '--json',
      ],
      project,
    );
    t.equal(extract.status, 0, extract.stderr);
    const blob = goldenRecords(2).find((r) => r.name === 'blob.bin')!.body as Uint8Array;
    t.equal(
      sha384(readFileSync(join(to, 'golden-data', 'main', 'blob.bin'))),
      sha384(blob),
      'an extracted record is the golden input',
    );

    const wrong = sh(
      bin,
      [
        'verify',
        '--from',
        bucket,
        '--run',
        'run-0001',
        '--key',
        key,
        '--pin-signer',
        `sha384:${'a'.repeat(96)}`,
      ],
      project,
    );
    t.equal(wrong.status, 8, 'a wrong signer pin exits 8 (the documented exit code)');

    // The single-file bundle the package ships for air-gapped machines runs on its own.
    const bundle = join(project, 'node_modules', '@coffer', 'recover', 'dist', 'coffer-recover.mjs');
    const carried = join(work, 'coffer-recover.mjs');
    cpSync(bundle, carried);
    const fromBundle = sh(
      'node',
      [carried, 'verify', '--from', bucket, '--run', 'run-0001', '--key', key, '--pin-signer', pin, '--json'],
      work,
    );
    t.equal(fromBundle.status, 0, fromBundle.stderr);
    t.equal(JSON.parse(fromBundle.stdout).verdict.checks.records, 7, 'the bundle verifies the run');
  });

  await t.test('(c) @coffer/crypto in a browser bundle seals and opens', async (t) => {
    writeFileSync(
      join(project, 'browser-entry.mjs'),
      `import { generateRecipient, open, platformName, seal, toBase64Url } from '@coffer/crypto';
// A failure is reported as a result, so the test fails at once with its code instead of timing out.
try {
  const aad = new TextEncoder().encode('downstream-smoke');
  const recipient = generateRecipient();
  const capsule = await seal(recipient.publicKey, new TextEncoder().encode('sealed in a browser'), aad);
  const opened = new TextDecoder().decode(await open(recipient.secretKey, capsule, aad));
  const secretKey = toBase64Url(recipient.secretKey);
  globalThis.smokeResult = { platformName, opened, capsule: toBase64Url(capsule), secretKey };
} catch (e) {
  globalThis.smokeResult = { error: String(e?.code ?? e) };
}
`,
    );
    const out = await build({
      entryPoints: [join(project, 'browser-entry.mjs')],
      absWorkingDir: project,
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      logLevel: 'silent',
    });
    const code = out.outputFiles[0]!.text;
    t.notMatch(code, /from ['"]node:/, 'no Node built-in left in the bundle');

    const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
    t.teardown(() => browser.close());
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // WebCrypto needs a secure context: serve the page as https from Playwright's router (no
    // server, no network; about:blank is not a secure context).
    await page.route('https://smoke.coffer.test/**', (route) => {
      const url = new URL(route.request().url());
      if (url.pathname === '/bundle.js') {
        return route.fulfill({ contentType: 'text/javascript', body: code });
      }
      return route.fulfill({
        contentType: 'text/html',
        body: '<!doctype html><title>smoke</title><script type="module" src="/bundle.js"></script>',
      });
    });
    await page.goto('https://smoke.coffer.test/');
    await page.waitForFunction(() => 'smokeResult' in globalThis, null, { timeout: 30_000 });
    const result = (await page.evaluate(
      () => (globalThis as unknown as { smokeResult: unknown }).smokeResult,
    )) as {
      platformName: string;
      opened: string;
      capsule: string;
      secretKey: string;
      error?: string;
    };
    t.same(errors, [], 'no page error');
    t.equal(result.error, undefined, 'no error in the page');
    t.equal(result.platformName, 'web', 'the browser build was bundled');
    t.equal(result.opened, 'sealed in a browser', 'sealed and opened in Chromium');

    // Node, with the installed package's node build, opens what the browser sealed.
    writeFileSync(
      join(project, 'open-in-node.mjs'),
      `import { fromBase64Url, open, platformName } from '@coffer/crypto';
const [sk, capsule] = process.argv.slice(2).map(fromBase64Url);
const text = new TextDecoder().decode(await open(sk, capsule, new TextEncoder().encode('downstream-smoke')));
console.log(platformName, text);
`,
    );
    const node = sh('node', ['open-in-node.mjs', result.secretKey, result.capsule], project);
    t.equal(node.status, 0, node.stderr);
    t.equal(node.stdout.trim(), 'node sealed in a browser', 'the node build opens the browser capsule');
  });
}
