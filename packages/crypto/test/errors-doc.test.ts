// Keeps docs/errors.md and the error codes in step, and checks that the sources throw only
// codes that are declared.
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { CRYPTO_ERROR_CODES } from '../src/errors.ts';

const root = new URL('../../../', import.meta.url);

t.test('docs/errors.md lists every @coffer/crypto code in its own section', async (t) => {
  const doc = readFileSync(new URL('docs/errors.md', root), 'utf8');
  const start = doc.indexOf('## @coffer/crypto');
  t.ok(start >= 0, 'section present');
  const rest = doc.slice(start + 3);
  const section = rest.slice(0, rest.search(/\n## /) >= 0 ? rest.search(/\n## /) : undefined);
  for (const code of CRYPTO_ERROR_CODES) t.match(section, `\`${code}\``, code);
  const documented = new Set(section.match(/ERR_CRYPTO_[A-Z_]+/g) ?? []);
  t.same([...documented].sort(), [...CRYPTO_ERROR_CODES].sort(), 'no stale codes documented');
});

t.test('sources use only declared codes', async (t) => {
  const srcDir = new URL('../src/', import.meta.url);
  const files = readdirSync(srcDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const used = new Set<string>();
  for (const f of files)
    for (const m of readFileSync(new URL(f, srcDir), 'utf8').match(/ERR_CRYPTO_[A-Z_]+/g) ?? []) used.add(m);
  for (const code of used) t.ok((CRYPTO_ERROR_CODES as readonly string[]).includes(code), code);
});
