import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { ENGINE_ERROR_CODES } from '../src/errors.ts';

t.test('docs/errors.md lists every engine error code under its heading', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## engine (apps/engine)');
  t.ok(start >= 0, 'engine section present');
  const rest = doc.slice(start + 1);
  const next = rest.indexOf('\n## ');
  const section = next === -1 ? rest : rest.slice(0, next);
  for (const code of ENGINE_ERROR_CODES) t.match(section, `\`${code}\``, `${code} documented`);
});
