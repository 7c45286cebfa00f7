// docs/errors.md lists every @coffer/notify code in its own section, and nothing else.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { NOTIFY_ERROR_CODES } from '../src/index.ts';

t.test('docs/errors.md lists every @coffer/notify code in its own section', async (t) => {
  const text = readFileSync(fileURLToPath(new URL('../../../docs/errors.md', import.meta.url)), 'utf8');
  const start = text.indexOf('## @coffer/notify');
  t.ok(start >= 0, 'section present');
  const next = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, next < 0 ? undefined : next);
  for (const code of NOTIFY_ERROR_CODES) t.match(section, `\`${code}\``, `${code} documented`);
  const listed = [...section.matchAll(/`(ERR_NOTIFY_[A-Z_]+)`/g)].map((m) => m[1]);
  for (const code of listed)
    t.ok((NOTIFY_ERROR_CODES as readonly string[]).includes(code!), `${code} exists`);
});
