// docs/reports.md and the threat rows stay in step with the code: every kind, the signing
// context and the default period are documented, and each test cited in docs/security-model.md
// "Signed reports" exists under that name.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { DEFAULT_PERIOD_DAYS, REPORT_CONTEXT, REPORT_KINDS } from '../../src/reports/index.ts';

const doc = (name: string) => readFileSync(join(repoRoot(), 'docs', name), 'utf8');

t.test('docs/reports.md documents every kind, the context and the default period', async (t) => {
  const text = doc('reports.md');
  for (const kind of REPORT_KINDS) t.match(text, `\n### \`${kind}\`\n`, kind);
  t.match(text, REPORT_CONTEXT);
  t.match(text, `\`to\` minus ${DEFAULT_PERIOD_DAYS} days`);
  t.match(text, 'coffer-recover verify-report --report');
});

t.test('the threat rows cite tests that exist', async (t) => {
  const all = doc('security-model.md');
  const start = all.indexOf('### Signed reports');
  t.ok(start > 0, 'section present');
  const rest = all.slice(start + 5);
  const rows = rest.slice(0, rest.search(/\n###? /) < 0 ? undefined : rest.search(/\n###? /));
  const cited = [
    ...rows.matchAll(/`(apps\/(?:engine|recover)\/test\/[a-z/-]+\.test\.ts)`((?:\s*"[^"]+",?)+)/g),
  ];
  t.ok(cited.length >= 6, `${cited.length} citations`);
  for (const [, file, names] of cited) {
    const source = readFileSync(join(repoRoot(), file!), 'utf8');
    for (const [, name] of names!.matchAll(/"([^"]+)"/g)) t.ok(source.includes(name!), `${file}: "${name}"`);
  }
});
