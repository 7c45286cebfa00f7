import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  failureReasonFor,
  openSource,
  SOURCE_ERROR_CODES,
  SOURCE_FAILURE_REASONS,
  SourceError,
} from '../src/index.ts';

t.test('docs/errors.md lists every @coffer/sources code with its disposition and reason', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## @coffer/sources');
  t.ok(start >= 0, 'section exists');
  const rest = doc.slice(start + 3);
  const end = rest.search(/\n## /);
  const section = end === -1 ? rest : rest.slice(0, end);
  for (const code of SOURCE_ERROR_CODES) {
    const e = new SourceError(code, 'x');
    const cell = e.reason === null ? e.disposition : `${e.disposition}, \`${e.reason}\``;
    t.match(section, `| \`${code}\` | ${cell} |`, `${code} documented as ${cell}`);
  }
  const documented = [...section.matchAll(/\| `(ERR_SOURCE_[A-Z_]+)` \|/g)].map((m) => m[1]);
  t.same([...documented].sort(), [...SOURCE_ERROR_CODES].sort(), 'no stale codes in the section');
});

t.test(
  'failure reasons are the closed list of docs/runs.md (the specification strings), verbatim',
  async (t) => {
    const doc = readFileSync(join(repoRoot(), 'docs', 'runs.md'), 'utf8');
    for (const reason of Object.values(SOURCE_FAILURE_REASONS))
      t.match(
        doc,
        new RegExp(`\\| \\d+ \\| \`${reason.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\` \\|`),
        reason,
      );
    t.equal(failureReasonFor('ERR_SOURCE_THROTTLED'), null, 'a throttle parks, it does not fail');
    t.equal(failureReasonFor('ERR_SOURCE_RECORD_VANISHED'), null, 'a vanished record is a warning');
    t.equal(failureReasonFor('ERR_SOURCE_LISTING_OVER_CAP'), SOURCE_FAILURE_REASONS.pageCap);
  },
);

t.test('openSource dispatches on type and refuses others', async (t) => {
  const dir = tempDir(t);
  t.equal(openSource({ type: 'files', root: dir }).type, 'files');
  t.equal(openSource({ type: 'sqlite', path: join(dir, 'x.db') }).type, 'sqlite');
  t.equal(openSource({ type: 'redis', url: 'redis://127.0.0.1:1' }).type, 'redis');
  t.equal(openSource({ type: 's3', bucket: 'b', endpoint: 'http://127.0.0.1:1' }).type, 's3');
  for (const type of ['d1', 'postgres', '', undefined]) {
    t.throws(() => openSource({ type } as never), {
      code: 'ERR_SOURCE_UNSUPPORTED_TYPE',
      reason: 'unsupported source type',
    });
  }
});

t.test('the page cap fails the listing', async (t) => {
  const dir = tempDir(t);
  const { writeFileSync } = await import('node:fs');
  for (let i = 0; i < 5; i++) writeFileSync(join(dir, `f${i}`), 'x');
  const src = openSource({ type: 'files', root: dir });
  t.teardown(() => src.close());
  const seen: string[] = [];
  await t.rejects(
    (async () => {
      for await (const e of src.enumerate({ pageSize: 2, maxPages: 2 })) seen.push(e.name);
    })(),
    { code: 'ERR_SOURCE_LISTING_OVER_CAP', reason: SOURCE_FAILURE_REASONS.pageCap },
  );
  t.equal(seen.length, 4);
  const ok: string[] = [];
  for await (const e of src.enumerate({ pageSize: 2, maxPages: 3 })) ok.push(e.name);
  t.equal(ok.length, 5);
});

t.test('the entry cap fails the listing before a page past it is handed out', async (t) => {
  const dir = tempDir(t);
  const { writeFileSync } = await import('node:fs');
  for (let i = 0; i < 5; i++) writeFileSync(join(dir, `f${i}`), 'x');
  const src = openSource({ type: 'files', root: dir });
  t.teardown(() => src.close());
  const seen: string[] = [];
  await t.rejects(
    (async () => {
      for await (const e of src.enumerate({ pageSize: 2, maxEntries: 4 })) seen.push(e.name);
    })(),
    {
      code: 'ERR_SOURCE_LISTING_OVER_CAP',
      reason: SOURCE_FAILURE_REASONS.pageCap,
      message: /more than 4 entries/,
    },
  );
  t.equal(seen.length, 4, 'the pages within the cap were listed');
  const ok: string[] = [];
  for await (const e of src.enumerate({ pageSize: 2, maxEntries: 5 })) ok.push(e.name);
  t.equal(ok.length, 5, 'exactly at the cap is fine');
  await t.rejects(
    (async () => {
      for await (const _ of src.enumerate({ maxEntries: 0 })) void _;
    })(),
    { code: 'ERR_SOURCE_INVALID_CONFIG' },
  );
});
