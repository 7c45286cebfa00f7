// docs/config-control.md names the settings, limits and signing context the code uses, and each
// test cited in docs/security-model.md "Configuration dual control and history" exists under that
// name.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import {
  CHANGE_TTL_MS,
  CONFIG_APPROVAL_POLICY,
  MAX_BATCH_UNDER_APPROVAL,
  RETENTION_PRUNE_APPROVAL_POLICY,
  SIGN_CONTEXT,
} from '../../src/config-changes/index.ts';
import { PRUNE_APPROVAL_TTL_MS } from '../../src/runs/retention.ts';

const doc = (name: string) => readFileSync(join(repoRoot(), 'docs', name), 'utf8');

t.test('config-control.md matches the code', async (t) => {
  const text = doc('config-control.md');
  for (const s of [CONFIG_APPROVAL_POLICY, RETENTION_PRUNE_APPROVAL_POLICY, SIGN_CONTEXT])
    t.ok(text.includes(`\`${s}\``), `names ${s}`);
  t.equal(CONFIG_APPROVAL_POLICY, 'config.approval.enabled');
  t.equal(RETENTION_PRUNE_APPROVAL_POLICY, 'retention.prune-approval.enabled');
  t.equal(MAX_BATCH_UNDER_APPROVAL, 10);
  t.ok(text.includes('**7 days**') && CHANGE_TTL_MS === 7 * 86_400_000, 'change expiry');
  t.equal(PRUNE_APPROVAL_TTL_MS, CHANGE_TTL_MS, 'prune approvals expire like changes');
});

t.test('every test cited in the threat rows exists', async (t) => {
  const all = doc('security-model.md');
  const start = all.indexOf('### Configuration dual control and history');
  t.ok(start > 0, 'section present');
  const rest = all.slice(start + 5);
  const end = rest.search(/\n###? /);
  const rows = end < 0 ? rest : rest.slice(0, end);
  const cited = [...rows.matchAll(/`(apps\/engine\/test\/[a-z/-]+\.test\.ts)`((?:\s*"[^"]+",?)+)/g)];
  t.ok(cited.length >= 7, `${cited.length} citations`);
  for (const [, file, names] of cited) {
    const source = readFileSync(join(repoRoot(), file!), 'utf8');
    for (const [, name] of names!.matchAll(/"([^"]+)"/g))
      t.ok(source.includes(`'${name}'`), `${file}: "${name}"`);
  }
});
