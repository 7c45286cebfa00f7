/**
 * `coffer-recover extract --run ID --key FILE --to DIR`: writes a run's records (all, or a
 * selection) under DIR.
 *
 * Algorithm:
 *   1. Open the run (@coffer/archive openRun: format version, signature, --pin-signer, key unwrap).
 *   2. Read the whole index (digest-checked by the archive reader) and select records: --record
 *      names exactly (each must exist, else exit 5), or --include / --exclude name prefixes.
 *   3. Map each name to a path with recordPath() (safe-name.ts). When the run's records come from
 *      more than one (binding, namespace) pair, the path is prefixed with the encoded binding and
 *      namespace segments, so equal names from different sources cannot collide.
 *   4. Before writing anything: refuse two records mapping to one path, and (without --force) any
 *      path that exists; refuse symlinks inside DIR on the way (safe-writer.ts).
 *   5. Write records in index order (each shard is decrypted once); each record streams to a
 *      temporary file, its SHA-384 is checked by the reader, its mode (permission bits only) and
 *      mtime are applied, and only then is it put in place under its name.
 * Failure property: a record that fails verification never appears under its name; records
 * written before a failure stay, and each of them was verified.
 */
import { chmod, utimes } from 'node:fs/promises';
import { type IndexEntry, openRun } from '@coffer/archive';
import { RecoverError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import type { Command, GlobalOptions } from './args.ts';
import { loadSecretKey } from './key-file.ts';
import type { Io, Reporter } from './output.ts';
import { progressFor } from './progress.ts';
import { quoteName, size } from './runs.ts';
import { encodeSegment, recordPath } from './safe-name.ts';
import { SafeTarget } from './safe-writer.ts';
import { requireSignerTrust } from './signer-trust.ts';
import { openSource } from './store.ts';
import { toRecoverError } from './translate.ts';

type ExtractCommand = Extract<Command, { name: 'extract' }> & GlobalOptions;

/** Whether a record is selected by --record / --include / --exclude. */
export function selects(name: string, cmd: Pick<ExtractCommand, 'records' | 'include' | 'exclude'>): boolean {
  if (cmd.records.length > 0) return cmd.records.includes(name);
  if (cmd.include.length > 0 && !cmd.include.some((p) => name.startsWith(p))) return false;
  return !cmd.exclude.some((p) => name.startsWith(p));
}

/** The path segments of `entry` under DIR (step 3). */
export function entrySegments(
  entry: Pick<IndexEntry, 'name' | 'binding' | 'namespace'>,
  multiSource: boolean,
): string[] {
  const segs = recordPath(entry.name);
  return multiSource ? [encodeSegment(entry.binding), encodeSegment(entry.namespace), ...segs] : segs;
}

/** Runs extract; returns the exit code or throws RecoverError. */
export async function extract(cmd: ExtractCommand, report: Reporter, io: Io): Promise<number> {
  const store = openSource(cmd.store, io.env);
  const runLabel = `run ${cmd.run}`;
  await requireSignerTrust(store, cmd, runLabel);
  const key = await loadSecretKey(cmd.key, io, report);
  const progress = progressFor(io, 'extract', cmd);
  try {
    let run: Awaited<ReturnType<typeof openRun>>;
    const all: IndexEntry[] = [];
    try {
      run = await openRun(store, {
        runId: cmd.run,
        ...(cmd.job !== undefined ? { job: cmd.job } : {}),
        ...(cmd.pinSigner !== undefined ? { pinSigner: cmd.pinSigner } : {}),
        secretKey: key.secretKey,
      });
      for await (const entry of run.records()) all.push(entry);
    } catch (e) {
      throw toRecoverError(e, runLabel);
    }
    if (!run.manifest.signerPinned) {
      report.note(
        'the signer was not pinned; pass --pin-signer with the fingerprint you trust to require it',
      );
    }

    const selected = all.filter((e) => selects(e.name, cmd));
    for (const name of cmd.records) {
      if (!all.some((e) => e.name === name)) {
        throw new RecoverError('ERR_RECOVER_NOT_FOUND', `${runLabel}: no record named ${quoteName(name)}`, {
          object: name,
        });
      }
    }
    if (selected.length === 0 && (cmd.include.length > 0 || cmd.exclude.length > 0)) {
      throw new RecoverError('ERR_RECOVER_NOT_FOUND', `${runLabel}: no record matches --include/--exclude`);
    }
    const sources = new Set(all.map((e) => JSON.stringify([e.binding, e.namespace])));
    const multiSource = sources.size > 1;

    const target = await SafeTarget.open(cmd.to, { force: cmd.force });
    const plan = selected.map((entry) => ({ entry, segments: entrySegments(entry, multiSource) }));
    const seen = new Map<string, string>();
    for (const { entry, segments } of plan) {
      const rel = segments.join('/');
      const other = seen.get(rel);
      if (other !== undefined) {
        throw new RecoverError(
          'ERR_RECOVER_EXISTS',
          `${runLabel}: records ${quoteName(other)} and ${quoteName(entry.name)} both map to ${target.pathOf(segments)}; extract them separately with --record`,
          { object: entry.name },
        );
      }
      seen.set(rel, entry.name);
    }
    for (const { entry, segments } of plan) {
      const refusal = await target.precheck(segments, `record ${quoteName(entry.name)}`);
      if (refusal) throw refusal;
    }

    const total = plan.reduce((n, p) => n + p.entry.size, 0);
    let done = 0;
    const written: { name: string; path: string; size: number; sha384: string }[] = [];
    for (const { entry, segments } of plan) {
      const label = `record ${quoteName(entry.name)}`;
      const body = guarded(run.readRecord(entry), io.signal, (n) => {
        done += n;
        progress.update(done, total, `${written.length + 1}/${plan.length} records`);
      });
      let path: string;
      try {
        path = await target.write(segments, body, label, (tmp) => applyMetadata(tmp, entry));
      } catch (e) {
        throw toRecoverError(e, `${runLabel}: ${label}`);
      }
      written.push({ name: entry.name, path, size: entry.size, sha384: entry.sha384 });
    }
    progress.done();
    report.result(
      {
        job: run.manifest.document.job,
        runId: run.manifest.document.runId,
        signer: run.manifest.signer,
        signerPinned: run.manifest.signerPinned,
        to: target.root,
        layout: multiSource ? 'binding/namespace/name' : 'name',
        records: written.length,
        bytes: total,
        written,
      },
      [
        `${runLabel} (job ${run.manifest.document.job}): extracted ${written.length} of ${all.length} records, ${size(total)}, to ${target.root}`,
        ...(multiSource
          ? ['  records come from several sources: paths are <binding>/<namespace>/<name>']
          : []),
      ],
    );
    return EXIT.OK;
  } finally {
    progress.done();
    key.secretKey.fill(0);
  }
}

async function* guarded(
  source: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
  onBytes: (n: number) => void,
): AsyncIterable<Uint8Array> {
  for await (const chunk of source) {
    if (signal?.aborted)
      throw new RecoverError(
        'ERR_RECOVER_INTERRUPTED',
        'interrupted; the record being written was discarded',
      );
    onBytes(chunk.byteLength);
    yield chunk;
  }
}

/** Applies permission bits (never setuid/setgid/sticky) and mtime from the record's metadata. */
async function applyMetadata(tmp: string, entry: IndexEntry): Promise<void> {
  const { mode, mtime } = entry.metadata;
  if (typeof mode === 'number' && Number.isInteger(mode) && mode >= 0) await chmod(tmp, mode & 0o777);
  if (typeof mtime === 'string') {
    const t = new Date(mtime);
    if (!Number.isNaN(t.getTime())) await utimes(tmp, t, t);
  }
}
