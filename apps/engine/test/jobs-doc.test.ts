// docs/jobs.md is the job schema's documentation: its field table and source-type table must name
// exactly the properties the route schema (TypeBox) accepts, so neither can drift from the other.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { markdownTable, repoRoot } from '@coffer/testkit';
import t from 'tap';
import { Source, UpsertBody } from '../src/jobs/schema.ts';

const doc = readFileSync(join(repoRoot(), 'docs', 'jobs.md'), 'utf8');

/** Body rows of the docs/jobs.md table whose header's first cell is `first`. */
const rows = (first: string): string[][] => markdownTable(doc, [first]).rows;

const unquote = (cell: string) => cell.replace(/^`|`$/g, '');

t.test('the Fields table names every property of the upsert body, and nothing else', async (t) => {
  const documented = rows('Field').map((r) => unquote(r[0]!));
  t.strictSame(
    [...documented].sort(),
    Object.keys(UpsertBody.properties).sort(),
    'docs/jobs.md "Fields" = UpsertBody properties',
  );
});

t.test('the Source types table names every source type with exactly its fields', async (t) => {
  const documented = new Map(
    rows('type').map((r) => [
      unquote(r[0]!),
      [...(r[1] ?? '').matchAll(/`([A-Za-z]+)\??`/g)].map((m) => m[1]!).sort(),
    ]),
  );
  const variants = (Source as unknown as { anyOf: { properties: Record<string, { const?: string }> }[] })
    .anyOf;
  t.equal(documented.size, variants.length, 'one row per source type');
  for (const v of variants) {
    const type = v.properties.type!.const!;
    const fields = Object.keys(v.properties)
      .filter((k) => k !== 'type')
      .sort();
    t.strictSame(documented.get(type), fields, `${type}: documented fields = schema fields`);
  }
});

t.test('the minimal job of the documentation is the one the issue names', async (t) => {
  t.match(
    doc,
    /"id": "docs", "cadenceSeconds": 3600, "source": \{ "type": "files", "path": "\/some\/dir" \}/,
  );
});
