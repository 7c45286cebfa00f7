/**
 * readKeyFile: the key files of the golden archive (written by encodeKeyFile) open the golden run
 * through the path alone, and each wrong file is refused with its own code, never echoing content.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { decodeKeyFile, fingerprint } from '@coffer/crypto';
import { createFsStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { openRun, readKeyFile, verifyRun } from '../src/index.ts';

const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'golden-0.1');
const keyPath = (name: string) => join(fixture, 'keys', name);

t.test('reads each kind to the bytes decodeKeyFile gives', async (t) => {
  for (const [file, kind] of [
    ['break-glass.key', 'recipient-secret'],
    ['operational.key', 'recipient-secret'],
    ['signer.pub', 'signer-public'],
    ['break-glass.pub', 'recipient-public'],
  ] as const) {
    const expected = decodeKeyFile(readFileSync(keyPath(file), 'utf8'), kind).key;
    t.same(await readKeyFile(keyPath(file), kind), expected, `${file} as ${kind}`);
  }
  t.same(
    await readKeyFile(pathToFileURL(keyPath('break-glass.key'))),
    decodeKeyFile(readFileSync(keyPath('break-glass.key'), 'utf8')).key,
    'a file URL, and recipient-secret by default',
  );
});

t.test('the break-glass key file path alone verifies and opens the golden run', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  const secretKey = await readKeyFile(keyPath('break-glass.key'));
  const signerPublicKey = await readKeyFile(
    join(fixture, 'store', '_RECOVERY', 'signer.pub'),
    'signer-public',
  );
  const pinSigner = fingerprint(signerPublicKey);
  const verdict = await verifyRun(store, { job: 'golden', runId: 'run-0001', secretKey, pinSigner });
  t.equal(verdict.ok, true, JSON.stringify(verdict.failure));
  t.equal(verdict.checks.keyUnwrapped, true);
  const run = await openRun(store, { job: 'golden', runId: 'run-0001', secretKey, signerPublicKey });
  let records = 0;
  for await (const _ of run.records()) records++;
  t.equal(records, verdict.checks.records, 'the index lists every verified record');
  t.ok(records > 0);
});

t.test('wrong files are refused with stable codes and no content in the message', async (t) => {
  const dir = tempDir(t, 'coffer-key-file-');
  const secretText = readFileSync(keyPath('break-glass.key'), 'utf8');
  const body = secretText.split('\n')[4]!;
  t.ok(body.length > 20, 'the key line of the fixture');

  await t.rejects(
    readKeyFile(keyPath('break-glass.pub')),
    { code: 'ERR_CRYPTO_WRONG_KIND' },
    '.pub for a secret',
  );
  await t.rejects(readKeyFile(keyPath('signer.key')), { code: 'ERR_CRYPTO_WRONG_KIND' }, 'a signer secret');
  await t.rejects(readKeyFile(join(dir, 'absent.key')), { code: 'ENOENT' }, 'no such file');
  await t.rejects(readKeyFile(dir), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' }, 'a directory');

  const big = join(dir, 'big.key');
  writeFileSync(big, `${secretText}${'#'.repeat(70 * 1024)}`);
  await t.rejects(readKeyFile(big), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' }, 'larger than any key file');

  // One character in the middle of the key data changed (the first ones hold the version byte): the fingerprint line no longer matches.
  const flipped = join(dir, 'flipped.key');
  const mid = body.length >> 1;
  const changed = `${body.slice(0, mid)}${body[mid] === 'A' ? 'B' : 'A'}${body.slice(mid + 1)}`;
  writeFileSync(flipped, secretText.replace(body, changed));
  const err = await readKeyFile(flipped).then(
    () => null,
    (e: Error & { code?: string }) => e,
  );
  t.equal(err?.code, 'ERR_CRYPTO_MALFORMED', 'an altered key file');
  t.notMatch(err?.message ?? '', body.slice(0, 16), 'the message does not echo the key data');
  t.notMatch(err?.message ?? '', changed.slice(0, 16));

  const truncated = join(dir, 'truncated.key');
  writeFileSync(truncated, secretText.slice(0, 60));
  await t.rejects(readKeyFile(truncated), { code: 'ERR_CRYPTO_MALFORMED' }, 'a truncated file');
});
