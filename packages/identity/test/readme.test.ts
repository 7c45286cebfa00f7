// The README's example runs as written (as a user would paste it into a .mjs file beside an
// installed @coffer/identity) and prints what its comments say.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');

t.test('the example prints what its comments say', async (t) => {
  const readme = readFileSync(join(pkg, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Example'));
  const m = /```js\n([\s\S]*?)```/.exec(section);
  t.ok(m, 'the example is there');
  const code = m![1]!;
  const expected = [...code.matchAll(/console\.log\(.*\); \/\/ (.+)$/gm)].map((x) => x[1]);
  t.same(expected, ['true', 'passkey:ada@example.org', 'true', '1']);
  // Inside the package directory, so `@coffer/identity` resolves through the exports
  // map to the built dist/ as it would for a user.
  const file = join(pkg, 'test', `.readme-example-${process.pid}.mjs`);
  writeFileSync(file, code);
  t.teardown(() => spawnSync('rm', ['-f', file]));
  const r = spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: pkg });
  t.equal(r.status, 0, r.stderr);
  t.same(r.stdout.trim().split('\n'), expected);
});
