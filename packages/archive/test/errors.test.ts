/** docs/errors.md lists every code; the spec reasons are exact; no secret reaches a message. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { toBase64Url, toHex } from '@coffer/crypto';
import { repoRoot } from '@coffer/testkit';
import t from 'tap';
import {
  ARCHIVE_ERROR_CODES,
  ARCHIVE_ERROR_REASONS,
  ArchiveError,
  createArchiveWriter,
  openRun,
  resumeArchiveWriter,
  SPEC_FAILURE_REASONS,
  verifyRun,
} from '../src/index.ts';
import { fsStore, keys, writerOptions } from './helpers.ts';

t.test('docs/errors.md lists every archive code', async (t) => {
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const start = doc.indexOf('## @coffer/archive');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end === -1 ? undefined : end);
  t.ok(start >= 0, 'section exists');
  for (const code of ARCHIVE_ERROR_CODES) t.ok(section.includes(`\`${code}\``), code);
  for (const reason of Object.values(SPEC_FAILURE_REASONS)) t.ok(section.includes(reason), reason);
});

t.test('spec failure reasons are verbatim', async (t) => {
  t.equal(
    SPEC_FAILURE_REASONS.ERR_ARCHIVE_TRUNCATED,
    'shard enumeration incomplete (refused to sign a truncated archive)',
  );
  t.equal(
    SPEC_FAILURE_REASONS.ERR_ARCHIVE_SHARD_ID_OVERFLOW,
    'shard id overflow (refused to seal a misordered archive)',
  );
  t.equal(
    SPEC_FAILURE_REASONS.ERR_ARCHIVE_CHECKPOINT_UNREADABLE,
    'checkpoint unwrap failed (resume state unreadable; signer may have rotated)',
  );
  t.equal(
    SPEC_FAILURE_REASONS.ERR_ARCHIVE_RESUME_DIVERGENT,
    'resume state divergent (mid-record resume refused)',
  );
  t.equal(SPEC_FAILURE_REASONS.ERR_ARCHIVE_INTERNAL, 'internal invariant violated');
  for (const code of ARCHIVE_ERROR_CODES) {
    const e = new ArchiveError(code);
    t.equal(e.code, code);
    t.equal(e.reason, ARCHIVE_ERROR_REASONS[code]);
  }
});

t.test('a planted marker secret never appears in an error', async (t) => {
  const MARKER = 'MARKER-SECRET-7f3a9c';
  const k = keys();
  const { store, root } = fsStore(t);
  const texts: string[] = [];
  const capture = (e: unknown) => {
    const a = e as ArchiveError;
    texts.push(String(a), a.message, a.reason, JSON.stringify({ ...a }), a.stack ?? '');
  };
  const w = await createArchiveWriter(
    writerOptions(store, k, { shardSize: 64 * 1024, source: { type: 'files' } }),
  );
  const secretBody = new TextEncoder().encode(MARKER.repeat(10_000));
  await w.addRecord({ name: `${MARKER}/name`, body: secretBody, metadata: { note: MARKER } });
  const checkpoint = await w.exportCheckpoint();
  await w
    .addRecord({
      name: `${MARKER}/2`,
      body: (async function* () {
        yield secretBody;
        throw new Error(`source says ${MARKER}`);
      })(),
    })
    .catch(capture);
  await w.addRecord({ name: 'x', body: new Uint8Array(1) }).catch(capture);
  // Gone before anyone resumes from its checkpoint (as a crashed writer is): a shard it was still
  // storing would otherwise race the resumed writers' own copy of that shard.
  await w.abort().catch(capture);
  const bad = await createArchiveWriter(writerOptions(store, k, { runId: 'run-0002' }));
  await bad
    .addRecord({
      name: MARKER,
      body: new Uint8Array(0),
      metadata: { [MARKER]: [MARKER] as unknown as string },
    })
    .catch(capture);
  const { writer } = await resumeArchiveWriter(checkpoint, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  await writer.addRecord({ name: `${MARKER}/other`, body: secretBody }).catch(capture);
  const again = await resumeArchiveWriter(checkpoint, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  t.equal(again.resume.partial?.name, `${MARKER}/name`);
  await again.writer.addRecord({ name: `${MARKER}/name`, body: secretBody, metadata: { note: MARKER } });
  await again.writer.addRecord({ name: `${MARKER}/2`, body: secretBody });
  await again.writer.finish();
  await resumeArchiveWriter(checkpoint, {
    store,
    signerSecretKey: k.operational.secretKey,
    operationalSecretKey: k.signer.secretKey,
  }).catch(capture);
  // Reader paths: wrong key, tampered shard, tampered index.
  await openRun(store, { runId: 'run-0001', secretKey: k.signer.secretKey }).catch(capture);
  const { readFileSync: rf, writeFileSync: wf } = await import('node:fs');
  for (const file of ['shards/000000.bin', 'index.bin']) {
    const p = join(root, 'jobs/job-a/runs/run-0001', file);
    const b = rf(p);
    b[b.length >> 1] = b[b.length >> 1]! ^ 1;
    wf(p, b);
    const v = await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey });
    t.equal(v.ok, false);
    texts.push(JSON.stringify(v));
    b[b.length >> 1] = b[b.length >> 1]! ^ 1;
    wf(p, b);
  }
  t.ok(texts.length >= 12, `collected ${texts.length} error texts`);
  const forbidden = [
    MARKER,
    ...[k.signer.secretKey, k.operational.secretKey, k.breakGlass.secretKey].flatMap((s) => [
      toHex(s).slice(0, 32),
      toBase64Url(s).slice(0, 32),
    ]),
  ];
  for (const text of texts)
    for (const f of forbidden)
      t.notOk(text.includes(f), 'no secret in error text', {
        text: text.slice(Math.max(0, text.indexOf(f) - 200), text.indexOf(f) + 50),
      });
});
