/**
 * ENGINE_CONNECTIONS_FILE loading: a valid file gives named connections and scratch targets; every
 * bad file is a ConfigError naming the variable and the field, never a value; a credential
 * reference to one of the engine's own variables (or to a variable holding one's value, or to an
 * unset variable) is refused; and a real engine process refuses to start (exit 2, one line).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t, { type Test as Tap } from 'tap';
import { loadConfig } from '../../src/config.ts';
import { ConfigError } from '../../src/errors.ts';
import { ADMIN_TOKEN } from '../helpers/engine.ts';

const SECRET_VALUE = 'connection-test-secret-value-0123';
process.env.COFFER_TEST_CONN_PASSWORD = SECRET_VALUE;
process.env.COFFER_TEST_CONN_KEY = 'AKIATESTKEY';
process.env.COFFER_TEST_CONN_SECRET = 'connection-test-s3-secret';
// The admin token under another name: the belt-and-braces check must catch it.
process.env.COFFER_TEST_SNEAKY = ADMIN_TOKEN;
delete process.env.COFFER_TEST_UNSET;

function load(t: Tap, doc: unknown, extra: Record<string, string> = {}) {
  const dir = tempDir(t, 'coffer-conn-config-');
  const file = join(dir, 'connections.json');
  writeFileSync(file, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return loadConfig(
    { ENGINE_DATA_DIR: join(dir, 'data'), ADMIN_TOKEN, ENGINE_CONNECTIONS_FILE: file, ...extra },
    dir,
  );
}

const redis = (extra: Record<string, unknown> = {}) => ({
  connections: {
    cache: {
      type: 'redis',
      url: 'redis://127.0.0.1:6379',
      passwordEnv: 'COFFER_TEST_CONN_PASSWORD',
      ...extra,
    },
  },
});

t.test('a valid file: connections, restore flags, scratch targets and defaults', async (t) => {
  const c = load(t, {
    connections: {
      cache: {
        type: 'redis',
        url: 'redis://10.0.0.5:6379/2',
        passwordEnv: 'COFFER_TEST_CONN_PASSWORD',
        restore: true,
      },
      assets: {
        type: 's3',
        endpoint: 'https://s3.example',
        region: 'us-east-1',
        forcePathStyle: true,
        accessKeyIdEnv: 'COFFER_TEST_CONN_KEY',
        secretAccessKeyEnv: 'COFFER_TEST_CONN_SECRET',
        buckets: ['assets-prod', 'coffer-scratch'],
      },
    },
    scratch: {
      files: '/var/tmp/coffer-scratch',
      redis: { connection: 'cache', db: 15 },
      s3: { connection: 'assets', bucket: 'coffer-scratch', prefix: 'drills' },
    },
  }).connections;
  t.same([...c.connections.keys()], ['cache', 'assets']);
  t.match(c.connections.get('cache'), {
    type: 'redis',
    restore: true,
    passwordEnv: 'COFFER_TEST_CONN_PASSWORD',
  });
  t.match(c.connections.get('assets'), {
    type: 's3',
    restore: false,
    buckets: ['assets-prod', 'coffer-scratch'],
  });
  t.same(c.scratch, {
    files: '/var/tmp/coffer-scratch',
    redis: { connection: 'cache', db: 15 },
    s3: { connection: 'assets', bucket: 'coffer-scratch', prefix: 'drills/' },
  });
  t.notMatch(JSON.stringify([...c.connections.values(), c.scratch]), SECRET_VALUE, 'no secret is held');

  const none = loadConfig({ ENGINE_DATA_DIR: '/tmp/coffer-x', ADMIN_TOKEN }, '/').connections;
  t.equal(none.connections.size, 0, 'unset: no connections');
  t.equal(none.scratch.files, '/tmp/coffer-x/drills', 'scratch files default under the data dir');
});

t.test('bad files: ConfigError naming the variable and the field, never a value', async (t) => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['not JSON', '{"connections": ', /not valid JSON/],
    ['not an object', '[]', /the file must be a JSON object/],
    ['unknown top-level field', { connection: {} }, /the file\.connection is not a known field/],
    ['unknown type', { connections: { x: { type: 'ftp' } } }, /connections\.x\.type must be "redis" or "s3"/],
    ['bad id', { connections: { '../x': { type: 'redis', url: 'redis://h' } } }, /not a valid connection id/],
    [
      'url with credentials',
      redis({ url: 'redis://:pw@127.0.0.1:6379' }),
      /connections\.cache\.url must not carry credentials/,
    ],
    ['url not redis', redis({ url: 'http://127.0.0.1:6379' }), /connections\.cache\.url must be a redis/],
    ['unknown field', redis({ pasword: 'x' }), /connections\.cache\.pasword is not a known field/],
    ['restore not boolean', redis({ restore: 'yes' }), /connections\.cache\.restore must be true or false/],
    [
      'admin token by name',
      redis({ passwordEnv: 'ADMIN_TOKEN' }),
      /passwordEnv names one of the engine’s own variables/,
    ],
    [
      'scim token by name',
      redis({ passwordEnv: 'SCIM_BEARER_TOKEN' }),
      /passwordEnv names one of the engine’s own/,
    ],
    [
      'database url by name',
      redis({ passwordEnv: 'ENGINE_DATABASE_URL' }),
      /passwordEnv names one of the engine’s own/,
    ],
    [
      'perimeter by name',
      redis({ passwordEnv: 'PERIMETER_ACCESS_AUD' }),
      /passwordEnv names one of the engine’s own/,
    ],
    [
      'harness by name',
      redis({ passwordEnv: 'HARNESS_TEST_FAULTS' }),
      /passwordEnv names one of the engine’s own/,
    ],
    [
      'admin token value under another name',
      redis({ passwordEnv: 'COFFER_TEST_SNEAKY' }),
      /holding the value of one of the engine’s own/,
    ],
    [
      'unset variable',
      redis({ passwordEnv: 'COFFER_TEST_UNSET' }),
      /passwordEnv names an environment variable that is not set/,
    ],
    [
      's3 key without secret',
      { connections: { a: { type: 's3', accessKeyIdEnv: 'COFFER_TEST_CONN_KEY' } } },
      /connections\.a\.secretAccessKeyEnv and accessKeyIdEnv must be given together/,
    ],
    [
      's3 bad bucket list',
      { connections: { a: { type: 's3', buckets: ['Not_A_Bucket'] } } },
      /connections\.a\.buckets holds a malformed/,
    ],
    [
      'scratch unknown connection',
      { scratch: { redis: { connection: 'nope' } } },
      /scratch\.redis\.connection names no configured connection/,
    ],
    [
      'scratch wrong type',
      { ...redis(), scratch: { s3: { connection: 'cache', bucket: 'b-1' } } },
      /scratch\.s3\.connection names a redis connection, not s3/,
    ],
    [
      'scratch bucket outside the list',
      {
        connections: { a: { type: 's3', buckets: ['only-this'] } },
        scratch: { s3: { connection: 'a', bucket: 'other-bucket' } },
      },
      /scratch\.s3\.bucket is not in the connection’s buckets/,
    ],
    ['scratch files relative', { scratch: { files: 'rel/dir' } }, /scratch\.files must be an absolute path/],
    [
      'scratch db out of range',
      { ...redis(), scratch: { redis: { connection: 'cache', db: 5000 } } },
      /scratch\.redis\.db must be an integer/,
    ],
  ];
  for (const [name, doc, message] of cases) {
    try {
      load(t, doc, {
        SCIM_BEARER_TOKEN: 'scim-token-value-0123456789',
        ENGINE_DATABASE_URL: 'postgres://u:pw@127.0.0.1/db',
      });
      t.fail(`${name}: accepted`);
    } catch (e) {
      t.ok(e instanceof ConfigError, `${name}: ConfigError`);
      t.equal((e as ConfigError).variable, 'ENGINE_CONNECTIONS_FILE', name);
      t.match((e as Error).message, message, name);
      for (const secret of [SECRET_VALUE, ADMIN_TOKEN, 'pw@'])
        t.notMatch((e as Error).message, secret, `${name}: no value in the message`);
    }
  }
  t.throws(
    () => loadConfig({ ADMIN_TOKEN, ENGINE_CONNECTIONS_FILE: '/nonexistent/connections.json' }, '/'),
    /ENGINE_CONNECTIONS_FILE: names a file that cannot be read/,
  );
});

t.test(
  'a real engine process with a bad file refuses to start (exit 2, one line naming the field)',
  async (t) => {
    const dir = tempDir(t, 'coffer-conn-main-');
    const file = join(dir, 'connections.json');
    writeFileSync(file, JSON.stringify(redis({ passwordEnv: 'ADMIN_TOKEN' })));
    const child = spawn(process.execPath, [join(repoRoot(), 'apps/engine/src/main.ts')], {
      env: {
        ...process.env,
        ENGINE_DATA_DIR: join(dir, 'data'),
        ADMIN_TOKEN,
        ENGINE_CONNECTIONS_FILE: file,
        PORT: '0',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += String(d);
    });
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    t.equal(code, 2, stderr);
    t.match(
      stderr,
      /^coffer-engine: configuration error: ENGINE_CONNECTIONS_FILE: connections\.cache\.passwordEnv names one of the engine’s own variables/,
    );
    t.notMatch(stderr, ADMIN_TOKEN);
  },
);
