import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';
import { CONFIG_VARIABLES, loadConfig } from '../src/config.ts';
import { ConfigError } from '../src/errors.ts';

t.test('defaults', async (t) => {
  const c = loadConfig({}, '/srv/x');
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, 8787);
  t.equal(c.dataDir, '/srv/x/.coffer');
  t.same(c.database, { kind: 'sqlite', file: '/srv/x/.coffer/state.sqlite' });
  t.equal(c.adminToken, undefined);
  t.equal(c.adminTokenDisabled, false);
  t.equal(c.demo, false);
  t.equal(c.harnessTestFaults, false);
  t.same(c.restoreRoots, []);
  t.equal(c.tls, undefined);
  t.equal(c.perimeter, undefined);
  t.equal(c.incrementalBaseCacheMiB, 100);
});

t.test('values are read verbatim from the specification names', async (t) => {
  const dir = tempDir(t);
  writeFileSync(join(dir, 'bg.pub'), 'PUBLIC KEY TEXT');
  const c = loadConfig(
    {
      HOST: '0.0.0.0',
      PORT: '9000',
      ENGINE_DATA_DIR: '/data',
      ENGINE_DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db',
      ADMIN_TOKEN: 'x'.repeat(20),
      ADMIN_TOKEN_DISABLED: 'true',
      CONSOLE_ORIGIN: 'https://console.example.com',
      PERIMETER_ACCESS_TEAM_DOMAIN: 'Team.Example.com',
      PERIMETER_ACCESS_AUD: 'aud1',
      SCIM_BEARER_TOKEN: 'scim',
      HARNESS_TEST_FAULTS: '1',
      ENGINE_DEMO: 'yes',
      ENGINE_RESTORE_ROOTS: ['/restore/a', '/restore/b'].join(':'),
      ENGINE_BREAK_GLASS_PUBLIC_KEY: 'bg.pub',
      ENGINE_INCREMENTAL_BASE_CACHE_MIB: '400',
    },
    dir,
  );
  t.equal(c.incrementalBaseCacheMiB, 400);
  t.equal(
    loadConfig({ ENGINE_INCREMENTAL_BASE_CACHE_MIB: '0' }, dir).incrementalBaseCacheMiB,
    0,
    '0: none kept',
  );
  t.equal(c.host, '0.0.0.0');
  t.equal(c.port, 9000);
  t.same(c.database, { kind: 'postgres', url: 'postgres://u:p@127.0.0.1:5432/db' });
  t.equal(c.adminTokenDisabled, true);
  t.equal(c.consoleOrigin, 'https://console.example.com');
  t.same(c.perimeter, { teamDomain: 'team.example.com', audience: 'aud1' });
  t.equal(c.scimBearerToken, 'scim');
  t.equal(c.harnessTestFaults, true);
  t.equal(c.demo, true);
  t.same(c.restoreRoots, ['/restore/a', '/restore/b']);
  t.same(c.breakGlassPublicKey, {
    variable: 'ENGINE_BREAK_GLASS_PUBLIC_KEY',
    text: 'PUBLIC KEY TEXT',
    path: join(dir, 'bg.pub'),
  });
});

t.test('bad values stop start-up naming the variable, never echoing the value', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: 'eighty' }, 'PORT'],
    [{ ADMIN_TOKEN: 'short-SECRET' }, 'ADMIN_TOKEN'],
    [{ ADMIN_TOKEN_DISABLED: 'maybe' }, 'ADMIN_TOKEN_DISABLED'],
    [{ CONSOLE_ORIGIN: 'https://console.example.com/' }, 'CONSOLE_ORIGIN'],
    [{ CONSOLE_ORIGIN: 'ftp://console.example.com' }, 'CONSOLE_ORIGIN'],
    [
      { PERIMETER_ACCESS_TEAM_DOMAIN: 'https://team.example.com', PERIMETER_ACCESS_AUD: 'a' },
      'PERIMETER_ACCESS_TEAM_DOMAIN',
    ],
    [{ PERIMETER_ACCESS_TEAM_DOMAIN: 'team.example.com' }, 'PERIMETER_ACCESS_AUD'],
    [{ PERIMETER_ACCESS_AUD: 'a' }, 'PERIMETER_ACCESS_TEAM_DOMAIN'],
    [{ ENGINE_DATABASE_URL: 'mysql://SECRET@h/db' }, 'ENGINE_DATABASE_URL'],
    [{ ENGINE_RESTORE_ROOTS: 'relative/dir' }, 'ENGINE_RESTORE_ROOTS'],
    [{ ENGINE_TLS_CERT_FILE: '/nonexistent/cert.pem' }, 'ENGINE_TLS_CERT_FILE'],
    [{ ENGINE_SIGNER_KEY_FILE: '/nonexistent/signer.key' }, 'ENGINE_SIGNER_KEY_FILE'],
    [{ ENGINE_BREAK_GLASS_PUBLIC_KEY: '/nonexistent/bg.pub' }, 'ENGINE_BREAK_GLASS_PUBLIC_KEY'],
    [{ HARNESS_TEST_FAULTS: 'sometimes' }, 'HARNESS_TEST_FAULTS'],
    [{ ENGINE_DEMO: '2' }, 'ENGINE_DEMO'],
    [{ ENGINE_LOG_LEVEL: 'loud' }, 'ENGINE_LOG_LEVEL'],
    [{ ENGINE_INCREMENTAL_BASE_CACHE_MIB: '70000' }, 'ENGINE_INCREMENTAL_BASE_CACHE_MIB'],
    [{ ENGINE_INCREMENTAL_BASE_CACHE_MIB: '-1' }, 'ENGINE_INCREMENTAL_BASE_CACHE_MIB'],
    [{ ENGINE_INCREMENTAL_BASE_CACHE_MIB: 'lots' }, 'ENGINE_INCREMENTAL_BASE_CACHE_MIB'],
  ];
  for (const [env, variable] of cases) {
    try {
      loadConfig(env, '/tmp');
      t.fail(`${variable} accepted`);
    } catch (err) {
      t.ok(err instanceof ConfigError, `${variable}: ConfigError`);
      t.equal((err as ConfigError).variable, variable);
      t.equal((err as ConfigError).code, 'ERR_ENGINE_CONFIG');
      t.ok((err as Error).message.startsWith(`${variable}: `), (err as Error).message);
      t.notMatch((err as Error).message, /SECRET/);
      t.notMatch((err as Error).message, /\n/);
    }
  }
  try {
    loadConfig({ ENGINE_TLS_CERT_FILE: import.meta.filename }, '/tmp');
    t.fail('half a TLS pair accepted');
  } catch (err) {
    t.equal((err as ConfigError).variable, 'ENGINE_TLS_KEY_FILE');
  }
});

t.test('docs/configuration.md documents every variable', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'configuration.md'), 'utf8');
  for (const v of CONFIG_VARIABLES) t.match(doc, new RegExp(`\`${v}\``), `${v} documented`);
});
