/**
 * `coffer-recover verify-report`: checks a signed report saved from the engine's
 * `GET /admin/reports/<kind>` (docs/reports.md "Verifying a report"), offline.
 *
 *   coffer-recover verify-report --report FILE (--signer FILE | --pin-signer FINGERPRINT) [--json]
 *
 * Steps, each failure one line and its exit code (README "Exit codes"):
 *  1. read FILE (`-` = stdin; at most 32 MiB) as the JSON reply `{ report, signature,
 *     signerPublicKey, ... }` (not one: exit 3);
 *  2. choose the key: `--signer` (an armoured signer public key file, e.g. the bucket's
 *     `_RECOVERY/signer.pub`; unreadable or another kind: exit 4), checked against `--pin-signer`
 *     when both are given; or the reply's own `signerPublicKey` when its fingerprint equals
 *     `--pin-signer` (else exit 8). With neither, a validly signed report is refused (exit 10)
 *     naming its signer's fingerprint to pin;
 *  3. the hybrid signature (Ed25519 and ML-DSA-87, both halves) over the UTF-8 bytes of `report`
 *     under the context `coffer/report/v1` (exit 3 when it does not verify);
 *  4. `report` is canonical JSON (RFC 8785) of itself, its `v` is 1 (else exit 6), and its
 *     `signerFingerprint` names the key it verified with (exit 3 otherwise);
 *  5. prints kind, generation time, period, signer and the report's summary (exit 0).
 *
 * A verified audit attestation that records a broken chain still exits 0: the report is authentic,
 * and its summary says BROKEN. Security: no failure message quotes the file's content.
 */
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { canonicalJson, decodeKeyFile, fingerprint, fromBase64Url, verify } from '@coffer/crypto';
import { RecoverError } from './errors.ts';
import { EXIT } from './exit-codes.ts';
import { parseOptionsOnly } from './internal/args.ts';
import { type Io, oneLine, Reporter } from './internal/output.ts';
import { toRecoverError } from './internal/translate.ts';

export const REPORT_CONTEXT = 'coffer/report/v1';
const MAX_REPORT_BYTES = 32 * 1024 * 1024;
const MAX_KEY_BYTES = 1024 * 1024;

export const VERIFY_REPORT_HELP = `coffer-recover verify-report: check a signed report from GET /admin/reports/<kind>, offline

usage: coffer-recover verify-report --report FILE (--signer FILE | --pin-signer FINGERPRINT) [--json]

  --report FILE        the engine's whole JSON reply, saved unchanged ('-' reads stdin)
  --signer FILE        the engine's signer public key file (.pub), e.g. a destination's
                       _RECOVERY/signer.pub; checked against --pin-signer when both are given
  --pin-signer FPR     the signer's fingerprint (sha384:...); without --signer the reply's own
                       signerPublicKey is used once its fingerprint matches (alias: --fingerprint)
  --json               one JSON document on stdout

exit codes: 0 verified, 2 usage, 3 tampered or not a signed report, 4 key file unusable,
6 unsupported report version, 8 signed by another key than the pinned one, 10 no signer given
`;

interface Options {
  report: string;
  signer: string | undefined;
  pin: string | undefined;
  json: boolean;
}

function parse(argv: readonly string[]): Options | 'help' {
  const values = parseOptionsOnly(
    argv,
    {
      report: { type: 'string' },
      signer: { type: 'string' },
      'pin-signer': { type: 'string' },
      fingerprint: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    'verify-report',
  );
  if (values.help) return 'help';
  const pins = [values['pin-signer'], values.fingerprint].filter((v) => typeof v === 'string');
  if (pins.length > 1 && pins[0] !== pins[1])
    throw new RecoverError('ERR_RECOVER_USAGE', '--pin-signer and --fingerprint name different keys');
  if (typeof values.report !== 'string' || values.report === '')
    throw new RecoverError('ERR_RECOVER_USAGE', '--report FILE is required');
  return {
    report: values.report,
    signer: typeof values.signer === 'string' ? values.signer : undefined,
    pin: pins[0] as string | undefined,
    json: values.json === true,
  };
}

async function readLimited(path: string, io: Io, max: number, what: string): Promise<string> {
  if (path === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of io.stdin) {
      const b = Buffer.from(chunk);
      size += b.byteLength;
      if (size > max) throw new RecoverError('ERR_RECOVER_VERIFY_FAILED', `${what} on stdin is too large`);
      chunks.push(b);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
  const label = `${what} ${resolve(path)}`;
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new RecoverError('ERR_RECOVER_IO', `${label}: not a regular file`);
    if (st.size > max) throw new RecoverError('ERR_RECOVER_VERIFY_FAILED', `${label}: too large`);
    return await readFile(path, 'utf8');
  } catch (e) {
    if (e instanceof RecoverError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new RecoverError(
      code === 'ENOENT' ? 'ERR_RECOVER_NOT_FOUND' : 'ERR_RECOVER_IO',
      `${label}: ${code === 'ENOENT' ? 'no such file' : `cannot read (${code ?? 'I/O error'})`}`,
      { object: resolve(path) },
    );
  }
}

interface Envelope {
  report: string;
  signature: string;
  signerPublicKey: string | undefined;
}

function envelopeOf(text: string): Envelope {
  const bad = (why: string) =>
    new RecoverError('ERR_RECOVER_VERIFY_FAILED', `not a Coffer signed report: ${why}`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw bad('the file is not JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('not a JSON object');
  const d = doc as Record<string, unknown>;
  if (typeof d.report !== 'string') throw bad('no report text');
  if (typeof d.signature !== 'string') throw bad('no signature');
  return {
    report: d.report,
    signature: d.signature,
    signerPublicKey: typeof d.signerPublicKey === 'string' ? d.signerPublicKey : undefined,
  };
}

function signerKeyOf(text: string, label: string): Uint8Array {
  try {
    return decodeKeyFile(text, 'signer-public').key;
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ERR_CRYPTO_UNSUPPORTED_VERSION')
      throw new RecoverError('ERR_RECOVER_KEY', `${label}: key file version not supported by this reader`);
    throw new RecoverError('ERR_RECOVER_KEY', `${label}: not a Coffer signer public key file`);
  }
}

function signatureValid(pub: Uint8Array, env: Envelope): boolean {
  let sig: Uint8Array;
  try {
    sig = fromBase64Url(env.signature);
  } catch {
    return false;
  }
  try {
    return verify(pub, new TextEncoder().encode(env.report), sig, REPORT_CONTEXT);
  } catch (e) {
    throw toRecoverError(e, 'signer public key');
  }
}

/** Chooses the key to verify with (step 2); may refuse with exit 4, 8 or 10. */
async function chooseKey(opts: Options, env: Envelope, io: Io): Promise<Uint8Array> {
  if (opts.signer !== undefined) {
    const label = opts.signer === '-' ? 'signer key from stdin' : `signer key file ${resolve(opts.signer)}`;
    const pub = signerKeyOf(await readLimited(opts.signer, io, MAX_KEY_BYTES, 'signer key file'), label);
    if (opts.pin !== undefined && fingerprint(pub) !== opts.pin)
      throw new RecoverError(
        'ERR_RECOVER_SIGNER_NOT_PINNED',
        `${label} has fingerprint ${fingerprint(pub)}, not the pinned ${oneLine(opts.pin, 120)}`,
      );
    return pub;
  }
  if (env.signerPublicKey === undefined)
    throw new RecoverError(
      'ERR_RECOVER_VERIFY_FAILED',
      'the report carries no signerPublicKey; pass --signer FILE',
    );
  const embedded = signerKeyOf(env.signerPublicKey, "the report's signerPublicKey");
  const fpr = fingerprint(embedded);
  if (opts.pin === undefined) {
    if (!signatureValid(embedded, env))
      throw new RecoverError('ERR_RECOVER_VERIFY_FAILED', 'the report signature does not verify (tampered)');
    throw new RecoverError(
      'ERR_RECOVER_SIGNER_UNPINNED',
      `validly signed by ${fpr}, but no signer is given. Check that fingerprint against your record of ` +
        `the engine's signer, then pass --pin-signer ${fpr} (or --signer with the engine's signer.pub)`,
    );
  }
  if (fpr !== opts.pin)
    throw new RecoverError(
      'ERR_RECOVER_SIGNER_NOT_PINNED',
      `the report's signer key has fingerprint ${fpr}, not the pinned ${oneLine(opts.pin, 120)}`,
    );
  return embedded;
}

interface Body {
  v: unknown;
  kind: string;
  generatedAt: string;
  engineVersion: string;
  period: { from: string; to: string };
  signerFingerprint: string;
  data: Record<string, unknown>;
}

/** Steps 3 and 4: the signature, the canonical form, the version and the named signer. */
function checkedBody(pub: Uint8Array, env: Envelope): Body {
  if (!signatureValid(pub, env))
    throw new RecoverError(
      'ERR_RECOVER_VERIFY_FAILED',
      `the report signature does not verify against ${fingerprint(pub)} (tampered, or signed by another key)`,
    );
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(env.report) as Record<string, unknown>;
  } catch {
    throw new RecoverError('ERR_RECOVER_VERIFY_FAILED', 'the signed report text is not JSON');
  }
  let canonical: string;
  try {
    canonical = canonicalJson(body);
  } catch {
    canonical = '';
  }
  if (canonical !== env.report)
    throw new RecoverError(
      'ERR_RECOVER_VERIFY_FAILED',
      'the signed report text is not canonical JSON (RFC 8785)',
    );
  if (body.v !== 1)
    throw new RecoverError(
      'ERR_RECOVER_UNSUPPORTED_VERSION',
      'report version is not 1; this reader knows v1 only',
    );
  const period = body.period as { from?: unknown; to?: unknown } | null;
  if (
    typeof body.kind !== 'string' ||
    typeof body.generatedAt !== 'string' ||
    typeof body.signerFingerprint !== 'string' ||
    typeof period !== 'object' ||
    period === null ||
    typeof body.data !== 'object' ||
    body.data === null
  )
    throw new RecoverError(
      'ERR_RECOVER_VERIFY_FAILED',
      'the signed report lacks kind, generatedAt, period or data',
    );
  if (body.signerFingerprint !== fingerprint(pub))
    throw new RecoverError(
      'ERR_RECOVER_VERIFY_FAILED',
      'the signed report names another signer than the key it verifies with',
    );
  return body as unknown as Body;
}

/** One line per fact of the report's summary (strings from the file pass through oneLine). */
function summaryLines(body: Body): string[] {
  const d = body.data;
  if (body.kind === 'audit-attestation') {
    const head = d.head as { seq?: unknown; hash?: unknown } | undefined;
    const v = d.verification as {
      ok?: unknown;
      eventsChecked?: unknown;
      firstBadSeq?: unknown;
      problem?: unknown;
    };
    return [
      `audit head: seq ${String(head?.seq)} ${oneLine(String(head?.hash), 200)}`,
      v?.ok === true
        ? `audit chain: intact (${String(v.eventsChecked)} events recomputed)`
        : `audit chain: BROKEN at seq ${String(v?.firstBadSeq)} (${oneLine(String(v?.problem), 80)})`,
    ];
  }
  const s = d.summary;
  if (typeof s !== 'object' || s === null) return [];
  return [
    `summary: ${Object.entries(s)
      .map(([k, v]) => `${oneLine(k, 60)} ${oneLine(String(v), 60)}`)
      .join(', ')}`,
  ];
}

/** Runs `verify-report` with its argv (the command name first or not). Returns the exit code. */
export async function verifyReport(argv: readonly string[], io: Io): Promise<number> {
  const args = argv[0] === 'verify-report' ? argv.slice(1) : argv;
  const json = args.includes('--json');
  const report = new Reporter(io, json, 'verify-report');
  try {
    const opts = parse(args);
    if (opts === 'help') {
      io.stdout.write(VERIFY_REPORT_HELP);
      return EXIT.OK;
    }
    const env = envelopeOf(await readLimited(opts.report, io, MAX_REPORT_BYTES, 'report file'));
    const pub = await chooseKey(opts, env, io);
    const body = checkedBody(pub, env);
    const lines = summaryLines(body);
    report.result(
      {
        verified: true,
        kind: body.kind,
        generatedAt: body.generatedAt,
        engineVersion: body.engineVersion,
        period: body.period,
        signer: body.signerFingerprint,
        summary:
          body.kind === 'audit-attestation'
            ? { verification: body.data.verification }
            : (body.data.summary ?? null),
      },
      [
        `report verified: ${oneLine(body.kind, 80)}`,
        `generated ${oneLine(body.generatedAt, 40)} by coffer-engine ${oneLine(String(body.engineVersion), 40)}`,
        `period ${oneLine(String(body.period.from), 40)} to ${oneLine(String(body.period.to), 40)}`,
        `signer ${body.signerFingerprint}`,
        ...lines,
      ],
    );
    return EXIT.OK;
  } catch (e) {
    const err = toRecoverError(e);
    report.fail(err);
    return err.exitCode;
  }
}
