/**
 * The `_RECOVERY/` prefix of a destination (docs/archive-format.md "_RECOVERY/"): the format
 * pointer, a copy of the current signer public key (pinnable by fingerprint) and a plain-text
 * README telling a person how to recover with `coffer-recover`, with no engine at all.
 */
import { canonicalJson, decodeKeyFile, encodeKeyFile, fingerprint } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import { utf8, utf8Decode } from './internal/bytes.ts';
import { isSupportedVersion } from './internal/manifest.ts';
import { getObject, putObject } from './internal/store.ts';
import { layout } from './layout.ts';
import { FORMAT_NAME, FORMAT_VERSION, type RecoveryPointer } from './types.ts';

const LAYOUT = 'jobs/<job>/runs/<runId>/';

/** The text of `_RECOVERY/README.txt` for a signer fingerprint. */
export function recoveryReadme(signer: string, formatVersion: string = FORMAT_VERSION): string {
  return `COFFER BACKUP ARCHIVES - HOW TO RECOVER WITHOUT THE ENGINE
==========================================================

This storage holds backups written by Coffer in archive format ${formatVersion}
(see _RECOVERY/FORMAT). Every run is encrypted, signed and hash-verified. You can
read it back with the standalone tool \`coffer-recover\` and the BREAK-GLASS secret
key (made earlier with \`coffer-recover keygen\`); the Coffer engine is not needed.

Layout
  ${LAYOUT}manifest.json   signed root manifest (plain JSON)
  ${LAYOUT}manifest.sig    its hybrid Ed25519 + ML-DSA-87 signature
  ${LAYOUT}index.bin       encrypted record index (names, sizes, digests)
  ${LAYOUT}shards/NNNNNN.bin  encrypted record data (format 0.1 runs)
  jobs/<job>/packs/<key>/     encrypted chunks shared by a job's runs (format 0.2 runs):
                              a 0.2 run reads chunks stored by EARLIER runs of its job, so
                              copy the whole jobs/<job>/ folder, never one run's folder alone
  _RECOVERY/signer.pub     public key of the signer that wrote the latest run

The signer's fingerprint is:
  ${signer}
Check it against the fingerprint you wrote down when the engine was set up, and pass
it to every command with --pin-signer so an archive signed by anyone else is refused.

Steps
  1. Copy this bucket or folder somewhere safe (or give the tool S3 credentials).
  2. List jobs and runs:
       coffer-recover inspect --from DIR
  3. Check a run end to end (exit code 0 only if every check passes):
       coffer-recover verify --from DIR --run RUN_ID --key break-glass.key \\
         --pin-signer ${signer}
  4. Write its records out (never overwrites unless --force):
       coffer-recover extract --from DIR --run RUN_ID --key break-glass.key \\
         --pin-signer ${signer} --to ./restored
     Add --include PREFIX / --exclude PREFIX / --record NAME to select records.
  For a bucket: --from s3://bucket/prefix with --endpoint and --region, and the
  credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.

A reader implements the format lines it names (0.1.x and 0.2.x). If the tool exits with code 6,
the archive is in another format version: get the coffer-recover release for it.
Nothing here ever needs to be changed; upgrades never rewrite archive bytes.

To make a break-glass key pair for a new installation:
  coffer-recover keygen --out break-glass.key     (give break-glass.key.pub to the engine)
`;
}

/** `_RECOVERY/FORMAT` and `signer.pub` are a few KiB; anything much larger is not ours. */
const RECOVERY_FILE_MAX_BYTES = 64 * 1024;

/**
 * Reads `_RECOVERY/FORMAT`; null when absent. `supported` says whether this reader implements
 * the pointer's major.minor. Throws ERR_ARCHIVE_MANIFEST_MALFORMED for an unreadable pointer,
 * ERR_ARCHIVE_DESTINATION for a store fault.
 */
export async function readRecoveryPointer(store: ObjectStore): Promise<RecoveryPointer | null> {
  const bytes = await getObject(store, layout.formatPointer, {
    maxBytes: RECOVERY_FILE_MAX_BYTES,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', {
        object: layout.formatPointer,
        detail: 'too large',
      }),
  });
  if (bytes === null) return null;
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(utf8Decode(bytes)) as Record<string, unknown>;
  } catch {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', {
      object: layout.formatPointer,
      detail: 'not JSON',
    });
  }
  if (
    typeof v !== 'object' ||
    v === null ||
    typeof v.format !== 'string' ||
    typeof v.formatVersion !== 'string'
  ) {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', { object: layout.formatPointer });
  }
  return {
    format: v.format,
    formatVersion: v.formatVersion,
    supported: v.format === FORMAT_NAME && isSupportedVersion(v.formatVersion),
    layout: typeof v.layout === 'string' ? v.layout : LAYOUT,
    signer: typeof v.signer === 'string' ? (v.signer as RecoveryPointer['signer']) : null,
  };
}

/**
 * Reads `_RECOVERY/signer.pub` (the current signer public key, armoured); null when absent.
 * Throws ERR_ARCHIVE_MANIFEST_MALFORMED when it is not a signer public key file.
 */
export async function readRecoverySigner(store: ObjectStore): Promise<Uint8Array | null> {
  const bytes = await getObject(store, layout.signerPublicKey, {
    maxBytes: RECOVERY_FILE_MAX_BYTES,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', {
        object: layout.signerPublicKey,
        detail: 'too large',
      }),
  });
  if (bytes === null) return null;
  try {
    return decodeKeyFile(utf8Decode(bytes), 'signer-public').key;
  } catch {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', {
      object: layout.signerPublicKey,
      detail: 'not a signer public key file',
    });
  }
}

/**
 * Writes `_RECOVERY/FORMAT`, `_RECOVERY/signer.pub` and `_RECOVERY/README.txt`. Idempotent.
 * Throws ERR_ARCHIVE_INVALID_ARGUMENT for a malformed key, ERR_ARCHIVE_DESTINATION.
 */
export async function writeRecoveryFiles(
  store: ObjectStore,
  options: { signerPublicKey: Uint8Array; formatVersion?: string },
): Promise<void> {
  let signer: string;
  let keyFile: string;
  try {
    signer = fingerprint(options.signerPublicKey);
    keyFile = encodeKeyFile('signer-public', options.signerPublicKey);
  } catch (e) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'malformed signer public key',
      cause: e,
    });
  }
  const pointer = utf8(
    `${canonicalJson({ format: FORMAT_NAME, formatVersion: options.formatVersion ?? FORMAT_VERSION, layout: LAYOUT, reader: 'coffer-recover', signer })}\n`,
  );
  const files: [string, Uint8Array, string][] = [
    [layout.formatPointer, pointer, 'application/json'],
    [layout.signerPublicKey, utf8(keyFile), 'text/plain; charset=utf-8'],
    [layout.readme, utf8(recoveryReadme(signer, options.formatVersion)), 'text/plain; charset=utf-8'],
  ];
  // Independent objects: stored together, every put settled before the first failure is thrown.
  const stored = await Promise.allSettled(
    files.map(([key, body, contentType]) =>
      putObject(store, key, body, { contentLength: body.length, contentType }),
    ),
  );
  for (const r of stored) if (r.status === 'rejected') throw r.reason;
}
