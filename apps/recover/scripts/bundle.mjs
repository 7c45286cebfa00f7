#!/usr/bin/env node
// Bundles dist/cli.js and every dependency (@coffer/*, @noble/*, the AWS SDK) into ONE file,
// dist/coffer-recover.mjs, that an operator can carry to an air-gapped machine and run with plain
// `node coffer-recover.mjs` on Node 22.15+ (no node_modules, no network). Run after `tsc -b`.
// Not minified, so the file can be read and audited; legal comments are kept at the end.
import { createHash } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const app = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
const outfile = join(app, 'dist', 'coffer-recover.mjs');

await build({
  entryPoints: [join(app, 'dist', 'cli.js')],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  // @coffer/crypto picks its node:crypto build under the `node` condition.
  conditions: ['node'],
  // CommonJS dependencies (parts of the AWS SDK) call require() for Node built-ins; an ES module
  // has no `require`, so give them one.
  banner: {
    js: "import { createRequire as __cofferCreateRequire } from 'node:module';\nconst require = __cofferCreateRequire(import.meta.url);",
  },
  define: { 'process.env.COFFER_RECOVER_BUNDLE_VERSION': JSON.stringify(pkg.version) },
  legalComments: 'eof',
  logLevel: 'warning',
});

// esbuild keeps the entry's `#!/usr/bin/env node` line; make sure, then mark it executable.
let text = readFileSync(outfile, 'utf8');
if (!text.startsWith('#!')) {
  text = `#!/usr/bin/env node\n${text}`;
  writeFileSync(outfile, text);
}
chmodSync(outfile, 0o755);
const digest = createHash('sha384').update(text).digest('hex');
writeFileSync(`${outfile}.sha384`, `sha384:${digest}  coffer-recover.mjs\n`);
console.log(
  `bundle: ${outfile} (${(text.length / 1024 / 1024).toFixed(1)} MiB, sha384:${digest.slice(0, 16)}...)`,
);
