/**
 * The posture contract and its code stay in step: docs/posture.md names every preflight item and
 * licence status the code produces; the licence variables are parsed (never read at start) and
 * documented; setup-acknowledge is an audit action; every test the security model's posture rows
 * cite exists under that name.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAuditAction } from '@coffer/audit';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';

const doc = (name: string) => readFileSync(join(repoRoot(), 'docs', name), 'utf8');
const section = (text: string, heading: string) => {
  const start = text.indexOf(heading);
  if (start < 0) return '';
  const next = text.indexOf('\n#', start + heading.length);
  return next < 0 ? text.slice(start) : text.slice(start, next);
};
const source = (path: string) => readFileSync(join(import.meta.dirname, '..', '..', 'src', path), 'utf8');

t.test('docs/posture.md names every preflight item and licence status', async (t) => {
  const posture = doc('posture.md');
  const ids = new Set(
    [...source('posture/preflight.ts').matchAll(/item\(\s*'([a-z.-]+)'/g)].map((m) => m[1]!),
  );
  for (const id of ['destination:', 'idp:']) ids.add(id);
  t.ok(ids.size >= 12, `${ids.size} item ids`);
  for (const id of ids) t.match(posture, `\`${id}`, `${id} documented`);
  for (const status of ['valid', 'absent', 'not-yet-valid', 'lapsed', 'invalid'])
    t.match(posture, `| \`${status}\` |`, `licence status ${status} documented`);
  for (const status of ['verified', 'configured', 'unconfigured', 'failed'])
    t.match(posture, `| \`${status}\` |`, `preflight status ${status} documented`);
});

t.test('the licence variables: parsed without reading anything, documented', async (t) => {
  const env = { ENGINE_DATA_DIR: '/tmp/coffer-posture-config' };
  t.same(loadConfig(env).licence, { file: undefined, vendorPublicKey: undefined });
  const c = loadConfig({
    ...env,
    ENGINE_LICENCE_FILE: '/nowhere/licence.json',
    ENGINE_LICENCE_VENDOR_PUBLIC_KEY: '/nowhere/vendor.pub',
  });
  t.same(c.licence, { file: '/nowhere/licence.json', vendorPublicKey: { path: '/nowhere/vendor.pub' } });
  const armoured = '-----BEGIN COFFER SIGNER PUBLIC KEY-----\nAAAA\n-----END COFFER SIGNER PUBLIC KEY-----';
  t.same(loadConfig({ ...env, ENGINE_LICENCE_VENDOR_PUBLIC_KEY: armoured }).licence.vendorPublicKey, {
    text: armoured,
  });
  for (const v of ['ENGINE_LICENCE_FILE', 'ENGINE_LICENCE_VENDOR_PUBLIC_KEY']) {
    t.ok((CONFIG_VARIABLES as readonly string[]).includes(v));
    t.match(doc('configuration.md'), new RegExp(`\\| \`${v}\` \\|`));
  }
});

t.test('setup-acknowledge is an audit action, documented', async (t) => {
  t.ok(isAuditAction('setup-acknowledge'));
  t.match(doc('audit.md'), /\| `setup-acknowledge` \|/);
});

t.test('every test the security model cites for posture exists', async (t) => {
  const rows = section(doc('security-model.md'), '### Posture');
  t.ok(rows.length > 0, 'section present');
  const cited = [...rows.matchAll(/`apps\/engine\/test\/posture\/([a-z-]+\.test\.ts)`((?:\s*"[^"]+",?)+)/g)];
  t.ok(cited.length >= 7, `${cited.length} citations`);
  for (const [, file, names] of cited) {
    const text = readFileSync(join(import.meta.dirname, file!), 'utf8');
    for (const [, name] of names!.matchAll(/"([^"]+)"/g)) t.ok(text.includes(name!), `${file}: "${name}"`);
  }
});
