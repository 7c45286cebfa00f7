/**
 * `coffer-recover inspect`: lists jobs and runs with format versions, signer fingerprints, sizes
 * and times, checking each run's manifest (version, signature, optional pin) without any key.
 * With --run, one run in detail; with --run and --key, also its records (names, sizes, SHA-384,
 * metadata), which only a key holder may see.
 * Sizes come from the signed totals: for a 0.1 run its shards; for a 0.2 run the packs it
 * references and the chunks it stored itself (the rest were stored by earlier runs of the job).
 *
 * Exit codes: listing exits 0 when the store could be listed (each run carries its own status);
 * `inspect --run` exits like verify would for the manifest (3, 5, 6, 8) and 4 for a key problem.
 */
import {
  type IndexEntry,
  listRuns,
  openRun,
  type RunListing,
  readRecoveryPointer,
  readRecoverySigner,
  readRunManifest,
} from '@coffer/archive';
import { fingerprint } from '@coffer/crypto';
import { RecoverError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import type { Command, GlobalOptions } from './args.ts';
import { loadSecretKey } from './key-file.ts';
import { type Io, oneLine, type Reporter } from './output.ts';
import {
  isChunkedView,
  quoteName,
  type RunSummaryView,
  readRawManifest,
  size,
  storageText,
  summarise,
} from './runs.ts';
import { openSource } from './store.ts';
import { toRecoverError } from './translate.ts';

type InspectCommand = Extract<Command, { name: 'inspect' }> & GlobalOptions;

interface RunStatus {
  /** 'ok' when the manifest's version and signature (and pin) check out. */
  status: 'ok' | 'failed';
  code?: string;
  exitCode?: number;
  message?: string;
  signerPinned?: boolean;
}

/** Runs inspect; returns the exit code or throws RecoverError. */
export async function inspect(cmd: InspectCommand, report: Reporter, io: Io): Promise<number> {
  const store = openSource(cmd.store, io.env);
  const recovery = await readRecovery(store);
  if (cmd.run !== undefined) return inspectRun(cmd, cmd.run, store, recovery, report, io);

  let runs: RunListing[];
  try {
    runs = await listRuns(store, cmd.job);
  } catch (e) {
    throw toRecoverError(e, `--from ${store.description}`);
  }
  if (cmd.job !== undefined && runs.length === 0) {
    throw new RecoverError('ERR_RECOVER_NOT_FOUND', `job ${cmd.job}: no runs under ${store.description}`, {
      object: `jobs/${cmd.job}/`,
    });
  }
  const rows: (RunSummaryView & { check: RunStatus; manifestKey: string })[] = [];
  for (const r of runs) {
    if (io.signal?.aborted) throw new RecoverError('ERR_RECOVER_INTERRUPTED', 'interrupted');
    const view = summarise(r.job, r.runId, await readRawManifest(store, r.manifestKey));
    rows.push({
      ...view,
      manifestKey: r.manifestKey,
      check: await checkManifest(store, r.job, r.runId, cmd.pinSigner),
    });
  }
  const jobs = [...new Set(rows.map((r) => r.job))];
  const lines: string[] = [`store ${store.description}`, ...recoveryLines(recovery)];
  if (rows.length === 0) lines.push('no runs found (is --from the destination prefix itself?)');
  for (const job of jobs) {
    lines.push(`job ${job}`);
    for (const r of rows.filter((x) => x.job === job)) {
      const status = r.check.status === 'ok' ? 'ok' : `FAILED: ${r.check.message} [${r.check.code}]`;
      lines.push(
        `  ${r.runId}  ${r.sealedAt ?? '?'}  format ${r.formatVersion ?? '?'}  ${r.records ?? '?'} records  ${size(r.bytes)} (${isChunkedView(r) ? storageText(r) : `${size(r.storedBytes)} stored, ${r.shards ?? '?'} shard${r.shards === 1 ? '' : 's'}`})  signer ${short(r.signer)}  ${status}`,
      );
    }
  }
  const signers = new Map<string, number>();
  for (const r of rows) if (r.signer) signers.set(r.signer, (signers.get(r.signer) ?? 0) + 1);
  if (signers.size > 0) {
    lines.push('signers (pin one with --pin-signer):');
    for (const [fp, n] of signers) lines.push(`  ${fp}  ${n} run${n === 1 ? '' : 's'}`);
  }
  report.result({ store: store.description, recovery, jobs, runs: rows }, lines);
  return EXIT.OK;
}

interface RecoveryView {
  pointer: { format: string; formatVersion: string; supported: boolean } | null;
  signer: string | null;
  problem?: string;
}

async function readRecovery(store: Parameters<typeof readRecoveryPointer>[0]): Promise<RecoveryView> {
  const view: RecoveryView = { pointer: null, signer: null };
  try {
    const p = await readRecoveryPointer(store);
    if (p)
      view.pointer = {
        format: oneLine(p.format, 100),
        formatVersion: oneLine(p.formatVersion, 100),
        supported: p.supported,
      };
    const s = await readRecoverySigner(store);
    if (s) view.signer = fingerprint(s);
  } catch (e) {
    const err = toRecoverError(e);
    if (err.code === 'ERR_RECOVER_STORE') throw err;
    view.problem = `${err.message} [${err.causeCode ?? err.code}]`;
  }
  return view;
}

function recoveryLines(r: RecoveryView): string[] {
  const out: string[] = [];
  if (r.pointer) {
    out.push(
      `_RECOVERY/FORMAT: ${r.pointer.format} ${r.pointer.formatVersion}${r.pointer.supported ? '' : ' (NOT supported by this reader: runs written in it exit 6)'}`,
    );
  } else if (!r.problem) out.push('_RECOVERY/FORMAT: absent');
  if (r.signer)
    out.push(`_RECOVERY/signer.pub: ${r.signer} (the bucket's current signer; not a trust anchor)`);
  if (r.problem) out.push(`_RECOVERY/: unreadable: ${r.problem}`);
  return out;
}

async function checkManifest(
  store: Parameters<typeof readRunManifest>[0],
  job: string,
  runId: string,
  pinSigner: string | undefined,
): Promise<RunStatus> {
  try {
    const m = await readRunManifest(store, { job, runId, ...(pinSigner ? { pinSigner } : {}) });
    return { status: 'ok', signerPinned: m.signerPinned };
  } catch (e) {
    const err = toRecoverError(e, `run ${runId}`);
    if (err.code === 'ERR_RECOVER_STORE') throw err;
    return {
      status: 'failed',
      code: err.causeCode ?? err.code,
      exitCode: err.exitCode,
      message: err.message,
    };
  }
}

function short(fp: string | null): string {
  return fp ? `${fp.slice(0, 23)}...` : '?';
}

async function inspectRun(
  cmd: InspectCommand,
  runId: string,
  store: Parameters<typeof readRunManifest>[0],
  recovery: RecoveryView,
  report: Reporter,
  io: Io,
): Promise<number> {
  const runLabel = `run ${runId}`;
  const base = {
    runId,
    ...(cmd.job !== undefined ? { job: cmd.job } : {}),
    ...(cmd.pinSigner ? { pinSigner: cmd.pinSigner } : {}),
  };
  let manifest: Awaited<ReturnType<typeof readRunManifest>>;
  try {
    manifest = await readRunManifest(store, base);
  } catch (e) {
    const err = toRecoverError(e, runLabel);
    // An unsupported or damaged run still gets its readable fields shown with --json.
    if (err.code !== 'ERR_RECOVER_NOT_FOUND' && err.code !== 'ERR_RECOVER_USAGE') {
      const listing = (await listRuns(store, cmd.job).catch(() => [])).find((r) => r.runId === runId);
      if (listing) {
        const run = summarise(listing.job, runId, await readRawManifest(store, listing.manifestKey));
        report.fail(err, { run });
        return err.exitCode;
      }
    }
    throw err;
  }
  const view = summarise(manifest.document.job, manifest.document.runId, manifest.document);
  const lines = [
    `run ${view.runId} (job ${view.job}): manifest ${manifest.key}`,
    `  format ${view.formatVersion}; signature ok${manifest.signerPinned ? ' (pinned signer)' : ' (signer not pinned)'}`,
    `  signer ${manifest.signer}`,
    `  previous run ${view.prevRunId ?? '(none)'}`,
    `  started ${view.startedAt}, sealed ${view.sealedAt}`,
    `  source ${view.source.type ?? '?'}${view.source.binding ? ` binding ${view.source.binding}` : ''}${view.source.namespace ? ` namespace ${view.source.namespace}` : ''}${view.source.origin ? ` from ${view.source.origin}` : ''}`,
    `  ${view.records} records, ${size(view.bytes)}; ${storageText(view)}`,
    ...(isChunkedView(view)
      ? [
          `  format 0.2: chunks live in packs under jobs/${view.job}/packs/${view.chunkKey ?? '?'}/, shared with the job's other runs (copy the whole jobs/${view.job}/ prefix)`,
        ]
      : []),
    ...view.recipients.map((r) => `  sealed to ${r.role} key ${r.recipient}`),
    ...recoveryLines(recovery),
  ];
  let records: (Omit<IndexEntry, 'metadata'> & { metadata: Record<string, unknown> })[] | undefined;
  if (cmd.key !== undefined) {
    const key = await loadSecretKey(cmd.key, io, report);
    try {
      const run = await openRun(store, { ...base, secretKey: key.secretKey });
      records = [];
      for await (const entry of run.records()) {
        records.push(entry);
        lines.push(
          `  ${String(entry.size).padStart(12)}  ${entry.sha384.slice(0, 23)}...  ${quoteName(entry.name)}`,
        );
      }
    } catch (e) {
      throw toRecoverError(e, runLabel);
    } finally {
      key.secretKey.fill(0);
    }
  }
  report.result(
    {
      run: view,
      manifestKey: manifest.key,
      manifestDigest: manifest.digest,
      signer: manifest.signer,
      signerPinned: manifest.signerPinned,
      recovery,
      ...(records ? { records } : {}),
    },
    lines,
  );
  return EXIT.OK;
}
