import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { OBJECTSTORE_ERROR_CODES } from '../src/index.ts';

t.test('docs/errors.md lists every @coffer/objectstore code', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## @coffer/objectstore');
  t.ok(start >= 0, 'section exists');
  const rest = doc.slice(start + 3);
  const section = rest.slice(0, rest.search(/\n## /) === -1 ? undefined : rest.search(/\n## /));
  for (const code of OBJECTSTORE_ERROR_CODES) t.match(section, `| \`${code}\` |`, `${code} documented`);
  const documented = [...section.matchAll(/\| `(ERR_OBJECTSTORE_[A-Z_]+)` \|/g)].map((m) => m[1]);
  t.same([...documented].sort(), [...OBJECTSTORE_ERROR_CODES].sort(), 'no stale codes in the section');
});
