// The written contract and the code stay in step: every error code is in docs/errors.md, the
// action table in docs/audit.md equals AUDIT_ACTIONS (same names, same order), and the hash
// definition's constants and worked example in docs/audit.md match the code and golden vector.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { markdownTable } from '@coffer/testkit';
import t from 'tap';
import { AUDIT_ACTIONS, AUDIT_ERROR_CODES, CSV_COLUMNS, GENESIS_HASH, hashEvent } from '../src/index.ts';

const read = (rel: string) => readFileSync(fileURLToPath(new URL(rel, import.meta.url)), 'utf8');
const docs = (name: string) => read(`../../../docs/${name}`);

/** First-column values of the markdown table whose header starts with `first`. */
const firstColumn = (markdown: string, first: string): string[] =>
  markdownTable(markdown, [first]).rows.map((r) => r[0]!);

t.test('docs/errors.md lists every @coffer/audit code in its own section', async (t) => {
  const text = docs('errors.md');
  const start = text.indexOf('## @coffer/audit');
  t.ok(start >= 0, 'section present');
  const next = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, next < 0 ? undefined : next);
  for (const code of AUDIT_ERROR_CODES) t.match(section, `\`${code}\``, `${code} documented`);
  const listed = [...section.matchAll(/`(ERR_AUDIT_[A-Z_]+)`/g)].map((m) => m[1]);
  for (const code of listed) t.ok((AUDIT_ERROR_CODES as readonly string[]).includes(code!), `${code} exists`);
});

t.test('docs/audit.md action table equals AUDIT_ACTIONS', async (t) => {
  const listed = firstColumn(docs('audit.md'), 'Action');
  t.strictSame(listed, [...AUDIT_ACTIONS], 'same names in the same order');
  t.equal(new Set(AUDIT_ACTIONS).size, AUDIT_ACTIONS.length, 'no duplicates');
  t.strictSame(
    AUDIT_ACTIONS.slice(0, 8),
    [
      'engine-version-change',
      'engine-secret-present',
      'notify-channel-change',
      'notify-rule-change',
      'config-change-proposed',
      'config-change-approved',
      'config-change-rejected',
      'restore-apply-denied',
    ],
    'the specification-named actions come first',
  );
});

t.test('docs/audit.md hash definition matches the code', async (t) => {
  const text = docs('audit.md');
  t.match(text, GENESIS_HASH, 'genesis spelled out');
  const vector = JSON.parse(read('./vectors/chain-v1.json')) as {
    firstEventCanonical: string;
    events: Array<{ hash: string }>;
  };
  t.match(text, vector.firstEventCanonical, 'worked example text is the golden canonical form');
  t.match(text, vector.events[0]!.hash, 'worked example hash');
  const example = /Example \(event 4 of the golden chain\):\n\n```json\n([\s\S]*?)\n```/.exec(text);
  t.ok(example, 'example event present');
  const event = JSON.parse(example![1]!);
  t.same(event, vector.events[3], 'the example is golden event 4');
  t.equal(hashEvent(event), event.hash, 'and its hash verifies');
  t.match(text.replace(/\s+/g, ' '), CSV_COLUMNS.join(', '), 'CSV columns listed in order');
});
