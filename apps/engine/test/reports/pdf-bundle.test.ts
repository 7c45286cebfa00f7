/**
 * The PDF renderer survives the release bundle: apps/engine/scripts/build-release.mjs bundles the
 * engine with esbuild, and a PDF library that read its font files from disk at run time would
 * build fine and fail in the release. Here the renderer is bundled with the same esbuild options
 * into a temporary directory away from any node_modules, run there as its own process, and its
 * output parsed back with pdf.js.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import { build } from 'esbuild';
import t from 'tap';

const dir = tempDir(t, 'coffer-report-bundle-');
const pdfModule = join(import.meta.dirname, '..', '..', 'src', 'reports', 'pdf.ts');
const entry = join(dir, 'entry.ts');
const out = join(dir, 'out.pdf');
writeFileSync(
  entry,
  `import { writeFileSync } from 'node:fs';
import { renderReportPdf } from ${JSON.stringify(pdfModule)};
const bytes = await renderReportPdf({
  v: 1, kind: 'backup-coverage', generatedAt: '2026-01-01T00:00:00.000Z', engineVersion: '9.9.9',
  period: { from: '2025-12-02T00:00:00.000Z', to: '2026-01-01T00:00:00.000Z' }, signerFingerprint: 'sha384:00',
  data: { evaluatedAt: '2026-01-01T00:00:00.000Z', summary: { jobs: 1, covered: 1, stale: 0, neverRun: 0 }, jobs: [{
    job: 'bundled-job', name: 'Bundled \\u00e9t\\u00e9 \\u4e2d', enabled: true, sourceType: 'files',
    schedule: { cadenceSeconds: 3600, staleAfterSeconds: 7200 },
    lastSuccess: { runId: 'r1', startedAt: '2025-12-31T23:00:00.000Z', finishedAt: '2025-12-31T23:00:01.000Z', ageSeconds: 3599 },
    destinations: [{ id: 'default', state: 'verified', reason: null, lastVerified: { runId: 'r1', at: null }, verifiedCopies: 1 }],
    retention: { keepLast: null, keepDays: 30 }, retained: { oldest: 'a', newest: 'b', count: 1 },
    runsInPeriod: { total: 1, ok: 1, failed: 0, other: 0 }, verdict: 'covered' }] },
});
writeFileSync(process.argv[2], bytes);
`,
);

t.test('the bundled renderer runs without the library on disk', async (t) => {
  // The options of build-release.mjs that matter here: one ESM file for node, require shimmed.
  await build({
    entryPoints: [entry],
    outfile: join(dir, 'bundle.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    logLevel: 'error',
    banner: {
      js: "import { createRequire as __cofferRequire } from 'node:module'; const require = __cofferRequire(import.meta.url);",
    },
  });
  const run = spawnSync(process.execPath, [join(dir, 'bundle.mjs'), out], { cwd: dir, encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const bytes = new Uint8Array(readFileSync(out));
  const { getDocument } = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const doc = await getDocument({ data: bytes, useSystemFonts: false }).promise;
  const text = (await (await doc.getPage(1)).getTextContent()).items
    .map((i) => ('str' in i ? i.str : ''))
    .join(' ');
  await doc.destroy();
  t.match(text, 'Job bundled-job (Bundled \u00e9t\u00e9 ?): COVERED', 'Latin-1 kept, other scripts as ?');
  t.match(text, 'This PDF carries no checkable signature.');
});
