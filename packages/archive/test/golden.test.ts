/**
 * The committed golden archive (fixtures/golden-0.1, made by make-golden.ts) must read and verify
 * on every run, and each way of breaking it must give its own precise error code.
 */
import { cpSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  canonicalJson,
  decodeKeyFile,
  fingerprint,
  formatDigest,
  fromBase64Url,
  generateRecipient,
  sha384,
  toBase64Url,
} from '@coffer/crypto';
import { createFsStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { listRuns, openRun, readRecoveryPointer, readRunManifest, verifyRun } from '../src/index.ts';
import { goldenRecords } from './golden-inputs.ts';
import { readAll } from './helpers.ts';

const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'golden-0.1');
const key = (name: string) => decodeKeyFile(readFileSync(join(fixture, 'keys', name), 'utf8')).key;
const operational = key('operational.key');
const breakGlass = key('break-glass.key');
const signerPub = key('signer.pub');
const pin = fingerprint(signerPub);
const RUN = 'jobs/golden/runs/run-0001';

t.test('the golden archive reads and verifies with both keys, pinned', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  t.same(
    (await listRuns(store)).map((r) => `${r.job}/${r.runId}`),
    ['golden/run-0001', 'golden/run-0002'],
  );
  const pointer = await readRecoveryPointer(store);
  t.same(pointer && { v: pointer.formatVersion, ok: pointer.supported, signer: pointer.signer }, {
    v: '0.1.0',
    ok: true,
    signer: pin,
  });
  for (const runId of ['run-0001', 'run-0002']) {
    const expected = goldenRecords(Number(runId.slice(-1)));
    for (const secretKey of [operational, breakGlass]) {
      const v = await verifyRun(store, { job: 'golden', runId, secretKey, pinSigner: pin });
      t.equal(v.ok, true, `${runId} verifies: ${JSON.stringify(v.failure)}`);
      t.equal(v.checks.signerPinned, true);
      const run = await openRun(store, { job: 'golden', runId, secretKey, signerPublicKey: signerPub });
      const all = await readAll(run);
      t.same(
        all.map((r) => [
          r.entry.name,
          r.entry.namespace,
          r.entry.sourceType,
          Buffer.from(r.body).toString('base64'),
        ]),
        expected.map((r) => [
          r.name,
          r.namespace ?? 'main',
          r.sourceType ?? 'files',
          Buffer.from(r.body as Uint8Array).toString('base64'),
        ]),
      );
      t.same(all[5]!.entry.metadata, { expiresAt: '2030-01-01T00:00:00.000Z', ttlSeconds: 3600 });
    }
  }
  const m = await readRunManifest(store, { job: 'golden', runId: 'run-0002' });
  t.equal(m.document.prevRunId, 'run-0001');
});

/** A writable copy of the fixture store. */
function copy(t: { teardown(fn: () => void): void }): {
  root: string;
  store: ReturnType<typeof createFsStore>;
} {
  const root = tempDir(t, 'coffer-golden-');
  cpSync(join(fixture, 'store'), root, { recursive: true });
  return { root, store: createFsStore({ root }) };
}

function flip(file: string, at: (len: number) => number): void {
  const b = readFileSync(file);
  const i = at(b.length);
  b[i] = b[i]! ^ 0x01;
  writeFileSync(file, b);
}

function editSignature(root: string, edit: (sig: Uint8Array) => void): void {
  const file = join(root, RUN, 'manifest.sig');
  const doc = JSON.parse(readFileSync(file, 'utf8'));
  const sig = fromBase64Url(doc.signature);
  edit(sig);
  doc.signature = toBase64Url(sig);
  writeFileSync(file, canonicalJson(doc));
}

async function failureCode(
  store: ReturnType<typeof createFsStore>,
  job = 'golden',
  runId = 'run-0001',
  secretKey = operational,
) {
  const v = await verifyRun(store, { job, runId, secretKey, pinSigner: pin });
  return v.ok ? 'ok' : `${v.failure!.code} ${v.failure!.object ?? ''}`.trim();
}

const cases: [string, (root: string) => void, string][] = [
  [
    'flip a byte in a shard',
    (r) => flip(join(r, RUN, 'shards/000001.bin'), (n) => n >> 1),
    `ERR_ARCHIVE_SHARD_TAMPERED ${RUN}/shards/000001.bin`,
  ],
  [
    'flip a byte in a shard tag',
    (r) => flip(join(r, RUN, 'shards/000002.bin'), (n) => n - 1),
    `ERR_ARCHIVE_SHARD_TAMPERED ${RUN}/shards/000002.bin`,
  ],
  [
    'flip a byte in the index',
    (r) => flip(join(r, RUN, 'index.bin'), (n) => n >> 1),
    `ERR_ARCHIVE_INDEX_TAMPERED ${RUN}/index.bin`,
  ],
  [
    'flip a byte in the manifest',
    (r) => {
      const f = join(r, RUN, 'manifest.json');
      writeFileSync(f, readFileSync(f, 'utf8').replace('"size":27', '"size":28'));
    },
    `ERR_ARCHIVE_MANIFEST_TAMPERED ${RUN}/manifest.json`,
  ],
  [
    'flip a byte in the Ed25519 half of the signature',
    (r) =>
      editSignature(r, (s) => {
        s[10] = s[10]! ^ 1;
      }),
    `ERR_ARCHIVE_BAD_SIGNATURE ${RUN}/manifest.sig`,
  ],
  [
    'flip a byte in the ML-DSA-87 half of the signature',
    (r) =>
      editSignature(r, (s) => {
        s[2000] = s[2000]! ^ 1;
      }),
    `ERR_ARCHIVE_BAD_SIGNATURE ${RUN}/manifest.sig`,
  ],
  [
    'delete a shard',
    (r) => rmSync(join(r, RUN, 'shards/000002.bin')),
    `ERR_ARCHIVE_SHARD_MISSING ${RUN}/shards/000002.bin`,
  ],
  [
    'delete the index',
    (r) => rmSync(join(r, RUN, 'index.bin')),
    `ERR_ARCHIVE_INDEX_MISSING ${RUN}/index.bin`,
  ],
  [
    'delete the signature',
    (r) => rmSync(join(r, RUN, 'manifest.sig')),
    `ERR_ARCHIVE_SIGNATURE_MISSING ${RUN}/manifest.sig`,
  ],
  [
    'swap a shard with the same shard of another run',
    (r) => cpSync(join(r, 'jobs/golden/runs/run-0002/shards/000001.bin'), join(r, RUN, 'shards/000001.bin')),
    `ERR_ARCHIVE_SHARD_TRANSPLANTED ${RUN}/shards/000001.bin`,
  ],
  [
    'swap two shards inside the run',
    (r) => {
      const a = join(r, RUN, 'shards/000000.bin');
      const b = join(r, RUN, 'shards/000001.bin');
      renameSync(a, `${a}.tmp`);
      renameSync(b, a);
      renameSync(`${a}.tmp`, b);
    },
    `ERR_ARCHIVE_SHARD_MISPLACED ${RUN}/shards/000000.bin`,
  ],
  [
    'replay a run under another run id of the same job',
    (r) => {
      rmSync(join(r, 'jobs/golden/runs/run-0002'), { recursive: true });
      cpSync(join(r, RUN), join(r, 'jobs/golden/runs/run-0002'), { recursive: true });
    },
    'ok', // checked below with run-0002
  ],
  [
    'doctor the format version',
    (r) => {
      const f = join(r, RUN, 'manifest.json');
      writeFileSync(f, readFileSync(f, 'utf8').replace('"formatVersion":"0.1.0"', '"formatVersion":"0.3.0"'));
    },
    `ERR_ARCHIVE_UNSUPPORTED_VERSION ${RUN}/manifest.json`,
  ],
  [
    'a patch version is still read (and then fails its signature)',
    (r) => {
      const f = join(r, RUN, 'manifest.json');
      writeFileSync(f, readFileSync(f, 'utf8').replace('"formatVersion":"0.1.0"', '"formatVersion":"0.1.7"'));
    },
    `ERR_ARCHIVE_MANIFEST_TAMPERED ${RUN}/manifest.json`,
  ],
];

for (const [name, breakIt, expected] of cases) {
  t.test(name, async (t) => {
    const { root, store } = copy(t);
    breakIt(root);
    if (name.startsWith('replay')) {
      t.equal(
        await failureCode(store, 'golden', 'run-0002'),
        'ERR_ARCHIVE_MANIFEST_REPLAYED jobs/golden/runs/run-0002/manifest.json',
      );
      return;
    }
    t.equal(await failureCode(store), expected);
  });
}

t.test('replay a manifest from another job', async (t) => {
  const { root, store } = copy(t);
  cpSync(join(root, RUN), join(root, 'jobs/other-job/runs/run-0001'), { recursive: true });
  t.equal(
    await failureCode(store, 'other-job'),
    'ERR_ARCHIVE_MANIFEST_REPLAYED jobs/other-job/runs/run-0001/manifest.json',
  );
  await t.rejects(openRun(store, { job: 'other-job', runId: 'run-0001', secretKey: operational }), {
    code: 'ERR_ARCHIVE_MANIFEST_REPLAYED',
  });
  // Without a job the run id is ambiguous now.
  await t.rejects(openRun(store, { runId: 'run-0001', secretKey: operational }), {
    code: 'ERR_ARCHIVE_AMBIGUOUS_RUN',
  });
});

t.test('wrong key, pinned signer mismatch, unknown run', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  const stranger = generateRecipient();
  await t.rejects(openRun(store, { job: 'golden', runId: 'run-0001', secretKey: stranger.secretKey }), {
    code: 'ERR_ARCHIVE_WRONG_KEY',
  });
  const other = `sha384:${'ab'.repeat(48)}`;
  await t.rejects(
    openRun(store, { job: 'golden', runId: 'run-0001', secretKey: operational, pinSigner: other }),
    {
      code: 'ERR_ARCHIVE_SIGNER_NOT_PINNED',
    },
  );
  await t.rejects(
    openRun(store, {
      job: 'golden',
      runId: 'run-0001',
      secretKey: operational,
      signerPublicKey: key('operational.pub'),
    }),
    { code: 'ERR_ARCHIVE_SIGNER_NOT_PINNED' },
  );
  await t.rejects(openRun(store, { job: 'golden', runId: 'run-9999', secretKey: operational }), {
    code: 'ERR_ARCHIVE_NOT_FOUND',
  });
  const v = await verifyRun(store, { job: 'golden', runId: 'run-0001', secretKey: stranger.secretKey });
  t.equal(v.failure?.code, 'ERR_ARCHIVE_WRONG_KEY');
  t.equal(v.checks.signature, true);
});

t.test('a tampered record digest in an authentic-looking index is caught while streaming', async (t) => {
  // Only a holder of the data key can forge an index; the digest of index.bin in the signed
  // manifest stops that too. Here we just prove the streaming check fires if a shard were wrong
  // after its own checks: serve a different (but authentic) shard payload through a patched manifest
  // is impossible without the signer, so assert the digest is what the index says.
  const store = createFsStore({ root: join(fixture, 'store') });
  const run = await openRun(store, { job: 'golden', runId: 'run-0001', secretKey: operational });
  for await (const e of run.records()) {
    const parts: Uint8Array[] = [];
    for await (const p of run.readRecord(e)) parts.push(p);
    t.equal(formatDigest(sha384(Buffer.concat(parts))), e.sha384, e.name);
  }
  const forged = { ...(await first(run.records())), sha384: `sha384:${'00'.repeat(48)}` as const };
  await t.rejects(
    async () => {
      for await (const _ of run.readRecord(forged)) void _;
    },
    { code: 'ERR_ARCHIVE_RECORD_TAMPERED' },
  );
});

async function first<T>(it: AsyncIterable<T>): Promise<T> {
  for await (const x of it) return x;
  throw new Error('empty');
}
