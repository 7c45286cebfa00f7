/** Help text for `coffer-recover help [command]` (kept in step with README.md by hand). */
import { OPEN_EXPORT_HELP } from '../open-export.ts';
import { VERIFY_REPORT_HELP } from '../verify-report.ts';

const STORE = `  --from DIR|s3://BUCKET/PREFIX  where the archives are: a local copy of the bucket
                                 (the destination prefix's contents) or the bucket itself
  --endpoint URL                 S3-compatible endpoint (R2, MinIO, Ceph, Garage ...)
  --region NAME                  S3 region (default: AWS_REGION or us-east-1)
  --path-style                   path-style S3 addressing (most self-hosted servers)
  S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY only, never argv.
  Format 0.2 runs reference chunks in packs stored by earlier runs of the same job
  (jobs/JOB/packs/): a local copy needs the whole jobs/JOB/ prefix, not one run's folder.`;

const COMMON = `  --json                         one JSON document on stdout (errors too)
  --no-progress                  no progress bar (it is drawn only on a terminal anyway)`;

const TOPICS: Record<string, string> = {
  'open-export': OPEN_EXPORT_HELP,
  'verify-report': VERIFY_REPORT_HELP,
  keygen: `coffer-recover keygen --out FILE

Makes a break-glass key pair. Writes the secret key to FILE (mode 0600) and the public key to
FILE.pub, and prints the public key's fingerprint (the only line on stdout). Refuses to replace
an existing FILE or FILE.pub. Give the engine FILE.pub; keep FILE offline.

${COMMON}
`,
  inspect: `coffer-recover inspect --from WHERE [--job JOB] [--run ID [--key FILE]] [--pin-signer FP]

Lists jobs and their runs: run ids, format versions, signer fingerprints, sizes, times. Needs no
key. With --run, shows that run's manifest; with --run and --key, also its records. A 0.1 run
shows its shards; a 0.2 run the packs it references and the new chunks it stored itself.

${STORE}
  --job JOB                      only this job
  --run ID                       only this run, in detail
  --key FILE                     secret key (break-glass or operational; - reads stdin)
  --pin-signer sha384:HEX        refuse runs signed by any other key
${COMMON}
`,
  verify: `coffer-recover verify --from WHERE --run ID [--key FILE]
                      (--pin-signer FP | --trust-unpinned-signer) [--job JOB]

Reads the whole run back and checks everything: format version, signature (and pin), every shard's
hash, the index, and with --key every shard's decryption and every record's SHA-384. A 0.2 run is
read from the job's packs (also those earlier runs stored), every chunk checked against its id;
without --key only its signed index can be checked, and the output says so. Exits 0 only if every
check passed, 3 naming the first object that failed (a missing pack included).

${STORE}
  --run ID                       the run to verify
  --job JOB                      the job, if the run id is ambiguous
  --key FILE                     secret key (break-glass or operational; - reads stdin)
  --pin-signer sha384:HEX        refuse runs signed by any other key (exit 8)
  --trust-unpinned-signer        trust whichever key signed the run (without it and
                                 without --pin-signer: exit 10, printing the fingerprint)
${COMMON}
`,
  extract: `coffer-recover extract --from WHERE --run ID --key FILE --to DIR
                       [--include PREFIX]... [--exclude PREFIX]... [--record NAME]... [--force]
                       (--pin-signer FP | --trust-unpinned-signer)

Writes the run's records under DIR, each checked against its SHA-384 before it is put in place
(a 0.2 run's records are read from packs stored by it and by earlier runs of the job).
Record names never leave DIR: unsafe characters and segments are percent-encoded (README.md,
"Extraction paths"). Existing files are never replaced without --force (exit 7), and a symlink
inside DIR is never followed.

${STORE}
  --run ID                       the run to extract
  --job JOB                      the job, if the run id is ambiguous
  --key FILE                     secret key (break-glass or operational; - reads stdin)
  --to DIR                       target directory (created if missing)
  --include PREFIX               only records whose name starts with PREFIX (repeatable)
  --exclude PREFIX               skip records whose name starts with PREFIX (repeatable)
  --record NAME                  exactly this record (repeatable; not with include/exclude)
  --force                        replace existing files (never follows symlinks)
  --pin-signer sha384:HEX        refuse runs signed by any other key (exit 8)
  --trust-unpinned-signer        trust whichever key signed the run (without it and
                                 without --pin-signer: exit 10, printing the fingerprint)
${COMMON}
`,
  bundle: `coffer-recover bundle open [--key FILE] [--pin-signer FP] BUNDLE.json

Opens an engine support bundle (docs/support-bundle.md): unseals it with the vendor support secret
key when it is sealed, checks the embedded signer's hybrid signature, and prints the document.
Exits 3 if the signature or capsule does not check out, 4 if the bundle is sealed to another key,
6 for a bundle version other than 1, 8 if validly signed by a key other than --pin-signer.

  --key FILE                     vendor support secret key (needed for sealed bundles; - reads stdin)
  --pin-signer sha384:HEX        require this engine signer (an unsigned bundle then fails)
  --json                         one JSON document on stdout (errors too)
`,
};

const OVERVIEW = `coffer-recover: offline recovery for Coffer archives (no engine needed)

Usage: coffer-recover <command> [options]

Commands:
  keygen   --out FILE                         make a break-glass key pair
  inspect  --from WHERE                       list jobs, runs, versions, signers, sizes
  verify   --from WHERE --run ID [--key FILE] read a run back and check everything
  extract  --from WHERE --run ID --key FILE --to DIR   write a run's records out
  bundle open [--key FILE] BUNDLE.json        unseal and verify an engine support bundle
  open-export --key FILE --in SEALED.json --out DIR
                                              open a sealed control-plane export
  verify-report --report FILE (--signer FILE | --pin-signer FP)
                                              check a signed engine report
  help [command]                              this text, or a command's
  version                                     print the version

Reads archive formats 0.1 and 0.2. A 0.2 run follows references to packs stored by earlier runs
of the same job: copy the whole jobs/JOB/ prefix (not one run's folder) when moving a destination.

Exit codes: 0 ok, 1 failure, 2 usage, 3 verification failed, 4 key problem, 5 not found,
6 unsupported format version, 7 refused to write, 8 signer not pinned, 9 store unreachable,
10 no signer pinned (verify, extract), 130 interrupted.
`;

/** The help text for `topic` (a command name) or the overview. */
export function helpText(topic: string | undefined): string {
  return (topic !== undefined && TOPICS[topic]) || OVERVIEW;
}
