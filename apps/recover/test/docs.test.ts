// The error-code and exit-code documentation stays in step with the code.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { RECOVER_ERROR_CODES } from '../src/errors.ts';
import { EXIT } from '../src/exit-codes.ts';
import { helpText } from '../src/internal/help.ts';

function section(text: string, heading: string): string {
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) return '';
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(/\n## /);
  return end < 0 ? rest : rest.slice(0, end);
}

t.test('docs/errors.md lists every coffer-recover code with its exit code', async (t) => {
  const doc = section(
    readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8'),
    '## coffer-recover (apps/recover)',
  );
  t.ok(doc.length > 0, 'section present');
  for (const [code, exit] of Object.entries(RECOVER_ERROR_CODES)) {
    const row = doc.split('\n').find((l) => l.startsWith(`| \`${code}\``));
    t.ok(row, `${code} documented`);
    t.match(
      row ?? '',
      new RegExp(`^\\| \`${code}\` \\| ${exit} \\|`),
      `${code} documented with exit ${exit}`,
    );
  }
});

t.test('README.md documents every exit code; help lists them', async (t) => {
  const readme = section(readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8'), '## Exit codes');
  const help = helpText(undefined);
  for (const [name, n] of Object.entries(EXIT)) {
    t.match(readme, new RegExp(`\\n\\| ${n} \\| `), `README row for ${n} (${name})`);
    t.match(help, new RegExp(`(^|[ ,])${n} `, 'm'), `help mentions ${n}`);
  }
  t.equal(EXIT.UNSUPPORTED_VERSION, 6, 'the specification requires 6 for an unsupported format version');
});
