/**
 * `coffer-recover verify --run ID [--key FILE]`: reads a whole run back and checks everything.
 *
 * With --key (break-glass or operational secret key) it runs @coffer/archive's verifyRun: format
 * version, hybrid signature (and --pin-signer), key unwrap, index digest, every shard's digest and
 * AEAD tag, the index against the shards, every record's plaintext SHA-384. Without --key it checks
 * what needs no key: format version, signature (and pin), and every stored object's size and
 * SHA-384 against the signed manifest; the output says that records were not decrypted.
 * Format 0.2: with --key the same verifyRun also reads every chunk the run references from the
 * job's packs, including packs stored by earlier runs, and checks each chunk's keyed id. Without
 * --key only the signed index can be checked (which packs the run needs is inside the sealed
 * index), and the output says that the packs were not checked.
 * Exit 0 only if every check performed passed; otherwise the exit code of the first failure (3 for
 * a tampered or missing object, 4 key, 6 format version, 8 signer not pinned), naming its object.
 */
import {
  verifyRun as archiveVerify,
  isChunkedManifest,
  layout,
  readRunManifest,
  type VerifyVerdict,
} from '@coffer/archive';
import { createSha384, type Digest, formatDigest } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { RecoverError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import type { Command, GlobalOptions } from './args.ts';
import { loadSecretKey } from './key-file.ts';
import type { Io, Reporter } from './output.ts';
import { progressFor } from './progress.ts';
import { size, summariseVerified } from './runs.ts';
import { requireSignerTrust } from './signer-trust.ts';
import { openSource } from './store.ts';
import { chainHint, mapCode, toRecoverError } from './translate.ts';

type VerifyCommand = Extract<Command, { name: 'verify' }> & GlobalOptions;

function interrupted(): RecoverError {
  return new RecoverError('ERR_RECOVER_INTERRUPTED', 'interrupted; verification incomplete');
}

/** Runs verify; returns the exit code (0 only when every check passed) or throws RecoverError. */
export async function verifyRun(cmd: VerifyCommand, report: Reporter, io: Io): Promise<number> {
  const store = openSource(cmd.store, io.env);
  const runLabel = `run ${cmd.run}`;
  await requireSignerTrust(store, cmd, runLabel);
  const progress = progressFor(io, 'verify', cmd);
  if (cmd.key === undefined) return verifyWithoutKey(store, cmd, report, io, runLabel);

  const key = await loadSecretKey(cmd.key, io, report);
  // For display only (the progress unit and the summary); verifyRun below checks everything again
  // and reports any failure in its verdict.
  const shown = await readRunManifest(store, {
    runId: cmd.run,
    ...(cmd.job !== undefined ? { job: cmd.job } : {}),
    ...(cmd.pinSigner !== undefined ? { pinSigner: cmd.pinSigner } : {}),
  }).catch(() => null);
  const chunked = shown !== null && isChunkedManifest(shown.document);
  let verdict: VerifyVerdict;
  try {
    verdict = await archiveVerify(store, {
      runId: cmd.run,
      ...(cmd.job !== undefined ? { job: cmd.job } : {}),
      ...(cmd.pinSigner !== undefined ? { pinSigner: cmd.pinSigner } : {}),
      secretKey: key.secretKey,
      onProgress: (p) => {
        if (io.signal?.aborted) throw interrupted();
        progress.update(
          p.bytesDone,
          p.bytes,
          // A 0.2 pack can be opened again after the bounded cache dropped it: count, no total.
          chunked ? `${p.shardsDone} pack reads` : `shard ${p.shardsDone}/${p.shards}`,
        );
      },
    });
  } catch (e) {
    throw toRecoverError(e, runLabel);
  } finally {
    progress.done();
    key.secretKey.fill(0);
  }
  if (io.signal?.aborted) throw interrupted();
  if (!verdict.ok) {
    const f = verdict.failure;
    const code = (f && mapCode(f.code)) ?? 'ERR_RECOVER_VERIFY_FAILED';
    const object = f?.object ?? undefined;
    let message = f?.message ?? 'verification failed';
    if (object && !message.includes(object)) message = `${object}: ${message}`;
    if (f?.code === 'ERR_ARCHIVE_AMBIGUOUS_RUN') message += ' (name the job with --job JOB)';
    if (f) message += chainHint(f.code, verdict.job);
    const err = new RecoverError(code, `${runLabel}: ${message}`, {
      ...(object ? { object } : {}),
      ...(f ? { causeCode: f.code } : {}),
    });
    report.fail(err, { verdict });
    return err.exitCode;
  }
  const c = verdict.checks;
  if (!c.signerPinned) {
    report.note('the signer was not pinned; pass --pin-signer with the fingerprint you trust to require it');
  }
  const view = shown !== null ? summariseVerified(shown.document) : null;
  report.result({ mode: 'full', verdict, ...(view ? { run: view } : {}) }, [
    `${runLabel} (job ${verdict.job ?? '?'}): ok`,
    `  format ${view?.formatVersion ?? 'version'}, signature${c.signerPinned ? ' (pinned signer)' : ''}, key unwrap and index verified`,
    chunked
      ? `  ${c.records} records, ${size(c.bytes)} read back from ${view?.packs ?? '?'} pack${view?.packs === 1 ? '' : 's'} of the job (whichever run stored them); every chunk matched its id and every record its SHA-384`
      : `  ${c.shards} shards, ${c.records} records, ${size(c.bytes)} read back and matched their SHA-384`,
  ]);
  return EXIT.OK;
}

/** Key-free verification: manifest (version, signature, pin) and every stored object's digest. */
async function verifyWithoutKey(
  store: ObjectStore,
  cmd: VerifyCommand,
  report: Reporter,
  io: Io,
  runLabel: string,
): Promise<number> {
  const progress = progressFor(io, 'verify', cmd);
  try {
    const manifest = await readRunManifest(store, {
      runId: cmd.run,
      ...(cmd.job !== undefined ? { job: cmd.job } : {}),
      ...(cmd.pinSigner !== undefined ? { pinSigner: cmd.pinSigner } : {}),
    }).catch((e: unknown) => {
      throw toRecoverError(e, runLabel);
    });
    const doc = manifest.document;
    // A 0.2 run's chunks are in the job's packs, named only inside its sealed index: without a key
    // the signed index is what can be checked (the note below says so).
    const shards = isChunkedManifest(doc) ? [] : doc.shards;
    const objects: { key: string; size: number; sha384: Digest; what: string }[] = shards.map((s, i) => ({
      key: layout.shard(doc.job, doc.runId, i),
      size: s.size,
      sha384: s.sha384,
      what: `shard ${i}`,
    }));
    objects.push({
      key: layout.index(doc.job, doc.runId),
      size: doc.index.size,
      sha384: doc.index.sha384,
      what: 'index',
    });
    const total = objects.reduce((n, o) => n + o.size, 0);
    let done = 0;
    for (const [i, o] of objects.entries()) {
      if (io.signal?.aborted) throw interrupted();
      const { bytes, digest } = await digestObject(store, o.key, o.size, runLabel, (n) => {
        done += n;
        progress.update(done, total, `object ${i + 1}/${objects.length}`);
      });
      if (bytes !== o.size || digest !== o.sha384) {
        const why =
          bytes > o.size
            ? `larger than the signed ${o.size} bytes`
            : bytes !== o.size
              ? `size ${bytes} differs from the signed ${o.size}`
              : 'SHA-384 differs from the signed manifest';
        throw new RecoverError(
          'ERR_RECOVER_VERIFY_FAILED',
          `${runLabel}: ${o.what} ${o.key}: ${why} (tampered or corrupted)`,
          {
            object: o.key,
            causeCode: o.what === 'index' ? 'ERR_ARCHIVE_INDEX_TAMPERED' : 'ERR_ARCHIVE_SHARD_TAMPERED',
          },
        );
      }
    }
    progress.done();
    const view = summariseVerified(doc);
    if (!manifest.signerPinned) {
      report.note(
        'the signer was not pinned; pass --pin-signer with the fingerprint you trust to require it',
      );
    }
    const chunked = isChunkedManifest(doc);
    report.note(
      chunked
        ? 'no --key: format 0.2 run: only its signed index was checked; the packs holding its records are named inside the sealed index, so checking them (and reading the records) needs --key'
        : 'no --key: stored objects were checked against the signed manifest, but not decrypted',
    );
    report.result(
      {
        mode: chunked ? 'signed-index' : 'sealed-objects',
        verdict: {
          ok: true,
          job: doc.job,
          runId: doc.runId,
          signer: manifest.signer,
          signerPinned: manifest.signerPinned,
          checks: { formatVersion: true, signature: true, objects: objects.length, bytes: total },
        },
        run: view,
      },
      [
        chunked
          ? `${runLabel} (job ${doc.job}): ok (signed index only; records not decrypted and packs not checked without --key)`
          : `${runLabel} (job ${doc.job}): ok (sealed objects only; records not decrypted without --key)`,
        `  format ${doc.formatVersion}, signature${manifest.signerPinned ? ' (pinned signer)' : ''} verified`,
        chunked
          ? `  the index, ${size(total)}, matched the signed SHA-384; the ${view.packs ?? '?'} pack${view.packs === 1 ? '' : 's'} it references were not checked (run verify with --key)`
          : `  ${doc.shards.length} shards and the index, ${size(total)}, matched the signed SHA-384s`,
      ],
    );
    return EXIT.OK;
  } finally {
    progress.done();
  }
}

async function digestObject(
  store: ObjectStore,
  key: string,
  signedSize: number,
  runLabel: string,
  onBytes: (n: number) => void,
): Promise<{ bytes: number; digest: Digest }> {
  const h = createSha384();
  let bytes = 0;
  try {
    for await (const chunk of await store.getStream(key)) {
      bytes += chunk.byteLength;
      // Reading stops one chunk past the signed size: a hostile 8 GiB object is not hashed whole.
      if (bytes > signedSize) break;
      h.update(chunk);
      onBytes(chunk.byteLength);
    }
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_OBJECTSTORE_NOT_FOUND') {
      throw new RecoverError('ERR_RECOVER_VERIFY_FAILED', `${runLabel}: ${key}: object missing`, {
        object: key,
        causeCode: 'ERR_ARCHIVE_SHARD_MISSING',
      });
    }
    throw toRecoverError(e, runLabel);
  }
  return { bytes, digest: formatDigest(h.digest()) };
}
