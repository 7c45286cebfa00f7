/**
 * The canary's written contract and its code stay in step: its codes in docs/errors.md, its
 * audit action in @coffer/audit and docs/audit.md, its interval variable (default, bounds) in the
 * configuration and docs/configuration.md, and every test the security model's canary rows cite
 * exists under that name.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAuditAction } from '@coffer/audit';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { CANARY_ERROR_CODES } from '../../src/canary/index.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';

const doc = (name: string) => readFileSync(join(repoRoot(), 'docs', name), 'utf8');
const section = (text: string, heading: string) => {
  const start = text.indexOf(heading);
  if (start < 0) return '';
  const next = text.indexOf('\n#', start + heading.length);
  return next < 0 ? text.slice(start) : text.slice(start, next);
};

t.test('docs/errors.md lists every canary code', async (t) => {
  const s = section(doc('errors.md'), '### Canary flight codes');
  t.ok(s.length > 0, 'section present');
  for (const code of CANARY_ERROR_CODES) t.match(s, `\`${code}\``, `${code} documented`);
  t.same(
    [...s.matchAll(/`(ERR_CANARY_[A-Z_]+)`/g)].map((m) => m[1]),
    [...CANARY_ERROR_CODES],
    'no undocumented or stale code',
  );
});

t.test('canary-dead is an audit action, documented', async (t) => {
  t.ok(isAuditAction('canary-dead'));
  t.match(doc('audit.md'), /\| `canary-dead` \|/);
});

t.test('ENGINE_CANARY_INTERVAL_SECONDS: default 3600, 60 to 86400, documented', async (t) => {
  const env = { ENGINE_DATA_DIR: '/tmp/coffer-canary-config' };
  t.equal(loadConfig(env).canaryIntervalSeconds, 3600);
  t.equal(loadConfig({ ...env, ENGINE_CANARY_INTERVAL_SECONDS: '60' }).canaryIntervalSeconds, 60);
  t.throws(() => loadConfig({ ...env, ENGINE_CANARY_INTERVAL_SECONDS: '59' }), {
    code: 'ERR_ENGINE_CONFIG',
    variable: 'ENGINE_CANARY_INTERVAL_SECONDS',
  });
  t.throws(() => loadConfig({ ...env, ENGINE_CANARY_INTERVAL_SECONDS: '86401' }), {
    code: 'ERR_ENGINE_CONFIG',
  });
  t.ok((CONFIG_VARIABLES as readonly string[]).includes('ENGINE_CANARY_INTERVAL_SECONDS'));
  t.match(doc('configuration.md'), /\| `ENGINE_CANARY_INTERVAL_SECONDS` \| `3600` \|/);
});

t.test('every test the security model cites for the canary exists', async (t) => {
  const rows = section(doc('security-model.md'), '### Integrity canary');
  t.ok(rows.length > 0, 'section present');
  const cited = [...rows.matchAll(/`apps\/engine\/test\/canary\/([a-z-]+\.test\.ts)`((?:\s*"[^"]+",?)+)/g)];
  t.ok(cited.length >= 5, `${cited.length} citations`);
  for (const [, file, names] of cited) {
    const source = readFileSync(join(import.meta.dirname, file!), 'utf8');
    for (const [, name] of names!.matchAll(/"([^"]+)"/g)) {
      t.ok(source.includes(name!), `${file}: "${name}"`);
    }
  }
});
