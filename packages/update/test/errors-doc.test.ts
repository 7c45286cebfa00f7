// docs/errors.md lists every @coffer/update code in its own section, and nothing else.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { UPDATE_ERROR_CODES } from './helpers/exports.ts';

t.test('docs/errors.md lists every @coffer/update code in its own section', async (t) => {
  const text = readFileSync(fileURLToPath(new URL('../../../docs/errors.md', import.meta.url)), 'utf8');
  const start = text.indexOf('## @coffer/update');
  t.ok(start >= 0, 'section present');
  const next = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, next < 0 ? undefined : next);
  for (const code of UPDATE_ERROR_CODES) t.match(section, `| \`${code}\` |`, `${code} documented`);
  const listed = [...section.matchAll(/`(ERR_UPDATE_[A-Z_]+)`/g)].map((m) => m[1]);
  for (const code of listed)
    t.ok((UPDATE_ERROR_CODES as readonly string[]).includes(code!), `${code} exists`);
});
