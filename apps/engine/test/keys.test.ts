import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, fingerprint, generateRecipient, generateSigner } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { loadConfig } from '../src/config.ts';
import { ConfigError } from '../src/errors.ts';
import { loadKeys } from '../src/keys.ts';

t.test('first start creates the signer and operational keys, mode 0600, and reuses them', async (t) => {
  const dir = tempDir(t);
  const config = loadConfig({ ENGINE_DATA_DIR: join(dir, 'data') });
  const first = loadKeys(config);
  t.ok(first.signer.created);
  t.ok(first.operational.created);
  for (const file of [first.signer.file, first.operational.file]) {
    t.equal(statSync(file).mode & 0o777, 0o600, `${file} is 0600`);
  }
  t.equal(statSync(join(dir, 'data', 'keys')).mode & 0o777, 0o700);
  t.match(first.signer.fingerprint, /^sha384:[0-9a-f]{96}$/);
  t.equal(first.ready, false, 'no break-glass key: not ready');
  t.same(first.missing, ['ENGINE_BREAK_GLASS_PUBLIC_KEY']);

  const again = loadKeys(config);
  t.notOk(again.signer.created);
  t.equal(again.signer.fingerprint, first.signer.fingerprint, 'same signer on the next start');
  t.equal(again.operational.fingerprint, first.operational.fingerprint);
});

t.test('break-glass public key from a .pub file or armoured text; a secret key is refused', async (t) => {
  const dir = tempDir(t);
  const pair = generateRecipient();
  const pub = encodeKeyFile('recipient-public', pair.publicKey);
  writeFileSync(join(dir, 'bg.key.pub'), pub);
  writeFileSync(join(dir, 'bg.key'), encodeKeyFile('recipient-secret', pair.secretKey));

  const fromFile = loadKeys(
    loadConfig({ ENGINE_DATA_DIR: join(dir, 'a'), ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.key.pub') }),
  );
  t.equal(fromFile.ready, true);
  t.same(fromFile.missing, []);
  t.equal(fromFile.breakGlass?.fingerprint, fingerprint(pair.publicKey));

  const fromText = loadKeys(
    loadConfig({ ENGINE_DATA_DIR: join(dir, 'b'), ENGINE_BREAK_GLASS_PUBLIC_KEY: pub }),
  );
  t.equal(fromText.breakGlass?.fingerprint, fingerprint(pair.publicKey));

  for (const value of [join(dir, 'bg.key'), encodeKeyFile('recipient-secret', pair.secretKey)]) {
    try {
      loadKeys(loadConfig({ ENGINE_DATA_DIR: join(dir, 'c'), ENGINE_BREAK_GLASS_PUBLIC_KEY: value }));
      t.fail('secret key accepted');
    } catch (err) {
      t.ok(err instanceof ConfigError);
      t.equal((err as ConfigError).variable, 'ENGINE_BREAK_GLASS_PUBLIC_KEY');
      t.match((err as Error).message, /SECRET key/);
    }
  }
  const signerPub = encodeKeyFile('signer-public', generateSigner().publicKey);
  t.throws(() =>
    loadKeys(loadConfig({ ENGINE_DATA_DIR: join(dir, 'd'), ENGINE_BREAK_GLASS_PUBLIC_KEY: signerPub })),
  );
  writeFileSync(join(dir, 'junk.pub'), 'not a key');
  t.throws(() =>
    loadKeys(
      loadConfig({ ENGINE_DATA_DIR: join(dir, 'e'), ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'junk.pub') }),
    ),
  );
});

t.test('engine keys from ENGINE_SIGNER_KEY_FILE / ENGINE_OPERATIONAL_KEY_FILE', async (t) => {
  const dir = tempDir(t);
  const signer = generateSigner();
  const op = generateRecipient();
  mkdirSync(join(dir, 'secrets'));
  writeFileSync(join(dir, 'secrets', 's.key'), encodeKeyFile('signer-secret', signer.secretKey), {
    mode: 0o600,
  });
  writeFileSync(join(dir, 'secrets', 'o.key'), encodeKeyFile('recipient-secret', op.secretKey), {
    mode: 0o600,
  });
  const keys = loadKeys(
    loadConfig({
      ENGINE_DATA_DIR: join(dir, 'data'),
      ENGINE_SIGNER_KEY_FILE: join(dir, 'secrets', 's.key'),
      ENGINE_OPERATIONAL_KEY_FILE: join(dir, 'secrets', 'o.key'),
    }),
  );
  t.equal(keys.signer.fingerprint, fingerprint(signer.publicKey));
  t.equal(keys.operational.fingerprint, fingerprint(op.publicKey));
  t.notOk(keys.signer.created);

  // The wrong kind in a key file is a configuration error naming the variable.
  try {
    loadKeys(
      loadConfig({
        ENGINE_DATA_DIR: join(dir, 'data2'),
        ENGINE_SIGNER_KEY_FILE: join(dir, 'secrets', 'o.key'),
      }),
    );
    t.fail('wrong kind accepted');
  } catch (err) {
    t.equal((err as ConfigError).variable, 'ENGINE_SIGNER_KEY_FILE');
    t.notMatch(
      (err as Error).message,
      new RegExp(readFileSync(join(dir, 'secrets', 'o.key'), 'utf8').slice(40, 80)),
    );
  }
});
