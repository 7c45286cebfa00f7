// `coffer-recover verify-report` on reports signed here the way the engine signs them
// (docs/reports.md): the real CLI in a child process, each exit code of the command's contract.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson, encodeKeyFile, fingerprint, generateSigner, sign, toBase64Url } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { runCli } from './helpers.ts';

const CONTEXT = 'coffer/report/v1';
const dir = tempDir(t, 'coffer-verify-report-');
const engine = generateSigner();
const fpr = fingerprint(engine.publicKey);
const pubFile = join(dir, 'engine-signer.pub');
writeFileSync(pubFile, encodeKeyFile('signer-public', engine.publicKey));

function signed(body: Record<string, unknown>, key = engine, text = canonicalJson(body)) {
  return {
    report: text,
    signature: toBase64Url(sign(key.secretKey, new TextEncoder().encode(text), CONTEXT)),
    signerPublicKey: encodeKeyFile('signer-public', key.publicKey),
    signerFingerprint: fingerprint(key.publicKey),
    verification: 'see docs/reports.md',
  };
}

const body = {
  v: 1,
  kind: 'backup-coverage',
  generatedAt: '2026-11-26T12:00:00.000Z',
  engineVersion: '1.2.3',
  period: { from: '2026-10-27T12:00:00.000Z', to: '2026-11-26T12:00:00.000Z' },
  signerFingerprint: fpr,
  data: {
    evaluatedAt: '2026-11-26T12:00:00.000Z',
    jobs: [],
    summary: { jobs: 0, covered: 0, stale: 0, neverRun: 0 },
  },
};

function file(name: string, doc: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return path;
}

const good = file('good.json', signed(body));

t.test(
  'a good report verifies with --signer, --pin-signer or --fingerprint, from a file or stdin',
  async (t) => {
    const a = await runCli(['verify-report', '--report', good, '--signer', pubFile]);
    t.equal(a.code, 0, a.stderr);
    t.match(a.stdout, /^report verified: backup-coverage\n/);
    t.match(a.stdout, /generated 2026-11-26T12:00:00.000Z by coffer-engine 1.2.3/);
    t.match(a.stdout, `signer ${fpr}`);
    for (const pin of ['--pin-signer', '--fingerprint']) {
      const b = await runCli(['verify-report', '--report', good, pin, fpr, '--json']);
      t.equal(b.code, 0, b.stderr);
      t.match(JSON.parse(b.stdout), {
        ok: true,
        command: 'verify-report',
        verified: true,
        kind: 'backup-coverage',
        summary: { jobs: 0 },
      });
    }
    const both = await runCli(['verify-report', '--report', good, '--signer', pubFile, '--pin-signer', fpr]);
    t.equal(both.code, 0, 'key file and pin agree');
    const stdin = await runCli(['verify-report', '--report', '-', '--signer', pubFile], {
      input: JSON.stringify(signed(body)),
    });
    t.equal(stdin.code, 0, stdin.stderr);
    const help = await runCli(['verify-report', '--help']);
    t.equal(help.code, 0);
    t.match(help.stdout, /usage: coffer-recover verify-report --report FILE/);
  },
);

t.test('each failure has its exit code and one line naming it', async (t) => {
  const other = generateSigner();
  const otherPub = file('other.pub', encodeKeyFile('signer-public', other.publicKey));
  const doc = signed(body);
  const cases: Array<[string, string[], number, RegExp]> = [
    ['no --report', ['--signer', pubFile], 2, /--report FILE is required/],
    ['unknown option', ['--report', good, '--key', 'x'], 2, /unknown option/],
    ['no signer given', ['--report', good], 10, new RegExp(`validly signed by ${fpr}`)],
    ['missing file', ['--report', join(dir, 'nope.json'), '--signer', pubFile], 5, /no such file/],
    ['not JSON', ['--report', file('x.json', 'not json'), '--signer', pubFile], 3, /not JSON/],
    ['another signer key file', ['--report', good, '--signer', otherPub], 3, /does not verify/],
    ['another pin', ['--report', good, '--pin-signer', fingerprint(other.publicKey)], 8, /not the pinned/],
    [
      'file and pin disagree',
      ['--report', good, '--signer', otherPub, '--pin-signer', fpr],
      8,
      /not the pinned/,
    ],
    [
      'a key file of the wrong kind',
      ['--report', good, '--signer', file('rk', encodeKeyFile('signer-secret', other.secretKey))],
      4,
      /not a Coffer signer public key/,
    ],
    [
      'one byte of the body',
      [
        '--report',
        file('t1.json', { ...doc, report: doc.report.replace('1.2.3', '1.2.4') }),
        '--signer',
        pubFile,
      ],
      3,
      /does not verify/,
    ],
    [
      'a truncated signature',
      ['--report', file('t2.json', { ...doc, signature: doc.signature.slice(0, -8) }), '--signer', pubFile],
      3,
      /does not verify/,
    ],
    [
      'a body that is not canonical',
      ['--report', file('t3.json', signed(body, engine, JSON.stringify(body, null, 2))), '--signer', pubFile],
      3,
      /not canonical JSON/,
    ],
    [
      'a body of version 2',
      ['--report', file('t4.json', signed({ ...body, v: 2 })), '--signer', pubFile],
      6,
      /version/,
    ],
    [
      'a body naming another signer',
      [
        '--report',
        file('t5.json', signed({ ...body, signerFingerprint: fingerprint(other.publicKey) })),
        '--signer',
        pubFile,
      ],
      3,
      /names another signer/,
    ],
  ];
  for (const [label, args, code, message] of cases) {
    const r = await runCli(['verify-report', ...args]);
    t.equal(r.code, code, `${label}: exit ${code}`);
    t.match(r.stderr, /^coffer-recover: verify-report: .* \[ERR_RECOVER_[A-Z_]+\]\n$/, `${label}: one line`);
    t.match(r.stderr, message, label);
    t.equal(r.stdout, '', `${label}: nothing on stdout`);
  }
});

t.test('a failure never echoes the file content', async (t) => {
  const marker = 'SECRET-MARKER-0123456789';
  const r = await runCli([
    'verify-report',
    '--report',
    file('m.json', `{"report": "${marker}", oops`),
    '--signer',
    pubFile,
    '--json',
  ]);
  t.equal(r.code, 3);
  t.notMatch(r.stderr + r.stdout, marker);
  const k = await runCli(['verify-report', '--report', good, '--signer', file('mk', marker)]);
  t.equal(k.code, 4);
  t.notMatch(k.stderr + k.stdout, marker);
});
