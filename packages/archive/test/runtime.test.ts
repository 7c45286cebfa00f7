import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir } from '@coffer/testkit';
import t from 'tap';

// A Node.js without zstd in node:zlib (before 22.15) must get a plain refusal, never a report that
// a good archive is tampered. The child process removes zstd from node:zlib before loading us.
t.test('a runtime without zstd is refused with ERR_ARCHIVE_UNSUPPORTED_RUNTIME', (t) => {
  const dir = tempDir(t);
  const preload = join(dir, 'no-zstd.cjs');
  writeFileSync(
    preload,
    "const z = require('node:zlib'); delete z.zstdCompressSync; delete z.zstdDecompressSync; require('node:module').syncBuiltinESMExports();\n",
  );
  const src = pathToFileURL(join(import.meta.dirname, '..', 'src', 'index.ts')).href;
  const script = join(dir, 'probe.mjs');
  writeFileSync(
    script,
    `const a = await import(${JSON.stringify(src)});
const out = {};
for (const [name, fn] of [
  ['createArchiveWriter', () => a.createArchiveWriter({})],
  ['openRun', () => a.openRun({}, { runId: 'r' })],
]) {
  try { await fn(); out[name] = 'no error'; } catch (e) { out[name] = e.code; }
}
const verdict = await a.verifyRun({}, { runId: 'r' });
out.verifyRun = verdict.failure?.code ?? 'ok';
console.log(JSON.stringify(out));
`,
  );
  const r = spawnSync(process.execPath, ['--require', preload, script], { encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}');
  t.same(out, {
    createArchiveWriter: 'ERR_ARCHIVE_UNSUPPORTED_RUNTIME',
    openRun: 'ERR_ARCHIVE_UNSUPPORTED_RUNTIME',
    verifyRun: 'ERR_ARCHIVE_UNSUPPORTED_RUNTIME',
  });
  t.end();
});
