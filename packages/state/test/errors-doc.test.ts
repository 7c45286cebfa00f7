// docs/errors.md lists every @coffer/state code, and no stale ones.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { STATE_ERROR_CODES } from '../src/index.ts';

t.test('docs/errors.md lists every @coffer/state code', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## @coffer/state');
  t.ok(start >= 0, 'section exists');
  const rest = doc.slice(start + 3);
  const end = rest.search(/\n## /);
  const section = end === -1 ? rest : rest.slice(0, end);
  for (const code of STATE_ERROR_CODES) t.match(section, `| \`${code}\` |`, `${code} documented`);
  const documented = [...section.matchAll(/\| `(ERR_STATE_[A-Z_]+)` \|/g)].map((m) => m[1]);
  t.same([...documented].sort(), [...STATE_ERROR_CODES].sort(), 'no stale codes in the section');
});
