/**
 * Runs the first ```js block after `heading` in a package's README as a user would: written to a
 * file inside the package directory (so the package's own name resolves through its exports map
 * to the built dist/) and run with this Node. Returns the outputs the block's comments promise
 * (`console.log(...); // <expected>`) and the lines it printed.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function runReadmeExample(
  packageDir: string,
  heading: string,
): { expected: string[]; printed: string[]; status: number | null; stderr: string } {
  const readme = readFileSync(join(packageDir, 'README.md'), 'utf8');
  const at = readme.indexOf(heading);
  if (at < 0) throw new Error(`README.md has no "${heading}"`);
  const block = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`no js example after "${heading}"`);
  const code = block[1]!;
  const expected = [...code.matchAll(/console\.log\(.*\); \/\/ (.+)$/gm)].map((m) => m[1]!);
  const file = join(packageDir, 'test', `.readme-example-${process.pid}.mjs`);
  writeFileSync(file, code);
  try {
    const r = spawnSync(process.execPath, [file], { encoding: 'utf8', cwd: packageDir });
    return { expected, printed: r.stdout.trim().split('\n'), status: r.status, stderr: r.stderr };
  } finally {
    rmSync(file, { force: true });
  }
}
