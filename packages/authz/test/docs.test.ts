// The written contract and the code stay in step: every error code is listed in docs/errors.md,
// and the matrix and decided-cell tables in docs/security-model.md equal the code's matrix.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { markdownTable as table } from '@coffer/testkit';
import t from 'tap';
import { AUTHZ_ERROR_CODES, CAPABILITIES, capabilitiesOf, holdersOf, ROLES } from '../src/index.ts';

const docs = (name: string) =>
  readFileSync(fileURLToPath(new URL(`../../../docs/${name}`, import.meta.url)), 'utf8');

t.test('docs/errors.md lists every @coffer/authz code in its own section', async (t) => {
  const text = docs('errors.md');
  const start = text.indexOf('## @coffer/authz');
  t.ok(start >= 0, 'section present');
  const next = text.indexOf('\n## ', start + 1);
  const section = text.slice(start, next < 0 ? undefined : next);
  for (const code of AUTHZ_ERROR_CODES) t.match(section, `\`${code}\``, `${code} documented`);
  const listed = [...section.matchAll(/`(ERR_AUTHZ_[A-Z_]+)`/g)].map((m) => m[1]);
  for (const code of listed) t.ok((AUTHZ_ERROR_CODES as readonly string[]).includes(code!), `${code} exists`);
});

t.test('docs/security-model.md matrix equals the code', async (t) => {
  const { header, rows } = table(docs('security-model.md'), ['Capability', 'Source']);
  t.plan(2 + rows.length * (ROLES.length + 1));
  t.strictSame(header.slice(2, 8), [...ROLES], 'role columns');
  t.strictSame(
    rows.map((r) => r[0]),
    [...CAPABILITIES],
    'one row per capability, in order',
  );
  for (const row of rows) {
    const capability = row[0] as (typeof CAPABILITIES)[number];
    ROLES.forEach((role, i) => {
      const cell = row[2 + i];
      t.equal(cell, capabilitiesOf(role).has(capability) ? 'yes' : 'no', `${capability} / ${role}`);
    });
    t.equal(Number(row[8]), holdersOf(capability).length, `${capability} holder count`);
  }
});

t.test('every decided cell has a reason that agrees with the code', async (t) => {
  const text = docs('security-model.md');
  const matrix = table(text, ['Capability', 'Source']).rows;
  const decided = table(text, ['Capability', 'Role', 'Held', 'Reason']).rows;
  const counted = matrix.filter((r) => r[1] === 'count').map((r) => r[0]);
  t.ok(counted.length > 0);
  const seen = new Set<string>();
  for (const [capability, role, held, reason] of decided) {
    t.ok(counted.includes(capability!), `${capability} is a count-only row`);
    t.ok(ROLES.includes(role as never), `${role} is a role`);
    const has = capabilitiesOf(role as (typeof ROLES)[number]).has(
      capability as (typeof CAPABILITIES)[number],
    );
    t.equal(held, has ? 'yes' : 'no', `${capability} / ${role} agrees with the code`);
    t.ok((reason ?? '').length > 10, `${capability} / ${role} has a reason`);
    seen.add(`${capability}/${role}`);
  }
  for (const capability of counted) {
    for (const role of ROLES) t.ok(seen.has(`${capability}/${role}`), `${capability} / ${role} decided`);
  }
});
