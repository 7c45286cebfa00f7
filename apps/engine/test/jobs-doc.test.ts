// docs/jobs.md is the job schema's documentation: its field table and source-type table must name
// exactly the properties the route schema (TypeBox) accepts, so neither can drift from the other.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { Source, UpsertBody } from '../src/routes/admin/jobs/schema.ts';

const doc = readFileSync(join(repoRoot(), 'docs', 'jobs.md'), 'utf8');

/** Cells of the rows of the first table whose header's first cell is `first`. */
function rows(first: string): string[][] {
  const lines = doc.split('\n');
  const cells = (l: string) =>
    l
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
  const at = lines.findIndex((l) => l.startsWith('|') && cells(l)[0] === first);
  if (at < 0) throw new Error(`docs/jobs.md: no table headed ${first}`);
  const out: string[][] = [];
  for (let i = at + 2; i < lines.length && lines[i]!.startsWith('|'); i++) out.push(cells(lines[i]!));
  return out;
}

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
    rows('`type`').map((r) => [
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
