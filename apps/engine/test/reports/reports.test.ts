/**
 * Signed reports (`GET /admin/reports/<kind>`, docs/reports.md) against a real engine over HTTP:
 * jobs with real runs (ok, failed, never run) and a real restore drill; each kind's signed JSON
 * verifies with @coffer/crypto and with the real `coffer-recover verify-report` (spawned), and its
 * content says what the engine knows; a tampered report (one byte of the body, either half of the
 * signature, a non-canonical re-signing, another signer) is refused; the gate (401 without a
 * credential), unknown kinds (404 listing the kinds), bad periods (400); `?format=pdf` parsed back
 * with pdf.js carries the job names and the "no checkable signature" line; no secret anywhere; a
 * broken audit chain is attested as broken (signed) and raises `audit-chain-break`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  canonicalJson,
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  fromBase64Url,
  generateSigner,
  sign,
  toBase64Url,
  toHex,
  verify,
} from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { ADMIN_TOKEN, http } from '../helpers/engine.ts';
import { restoreWorld } from '../restore/helpers.ts';

const CLI = join(import.meta.dirname, '..', '..', '..', 'recover', 'src', 'cli.ts');
const CONTEXT = 'coffer/report/v1';
const KINDS = ['backup-coverage', 'restore-drills', 'audit-attestation'] as const;

/** The built coffer-recover, with nothing of this process's environment but PATH and HOME. */
async function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
  const r = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function pdfText(bytes: Uint8Array): Promise<{ text: string; pages: number; title: unknown }> {
  const { getDocument } = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const doc = await getDocument({ data: bytes, useSystemFonts: false }).promise;
  const parts: string[] = [];
  for (let p = 1; p <= doc.numPages; p++) {
    const content = await (await doc.getPage(p)).getTextContent();
    for (const item of content.items) if ('str' in item) parts.push(item.str);
  }
  const meta = await doc.getMetadata();
  const pages = doc.numPages;
  await doc.destroy();
  return {
    text: parts.join(' ').replace(/\s+/g, ' '),
    pages,
    title: (meta.info as { Title?: unknown }).Title,
  };
}

// --- The world: three jobs, real runs, one real drill -------------------------------------------
const w = await restoreWorld(t);
const dir = tempDir(t, 'coffer-reports-');
const src = join(dir, 'source-secret-path-marker');
mkdirSync(join(src, 'sub'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'sub', 'b.txt'), 'bravo\n'.repeat(500));

const up = await w.post('/jobs', {
  id: 'docs',
  name: 'Team documents',
  cadenceSeconds: 3600,
  retention: { keepLast: 7 },
  source: { type: 'files', path: src },
});
if (up.status !== 200) throw new Error(up.text);
const trig = await w.post('/trigger', { id: 'docs' });
const okRunId = trig.json().runId as string;
await w.e.app.runs.idle();
if ((await w.e.app.state.runs.get(okRunId))?.status !== 'ok') throw new Error('docs run did not end ok');
const drill = await w.drill('docs');
if (drill?.verdict !== 'pass') throw new Error(`drill: ${JSON.stringify(drill)}`);

await w.post('/jobs', {
  id: 'broken',
  name: 'Gone away',
  cadenceSeconds: 3600,
  source: { type: 'files', path: join(dir, 'no-such-directory') },
});
const failedRunId = (await w.post('/trigger', { id: 'broken' })).json().runId as string;
await w.e.app.runs.idle();
if ((await w.e.app.state.runs.get(failedRunId))?.status !== 'failed')
  throw new Error('broken run did not fail');
await w.post('/jobs', {
  id: 'idle',
  cadenceSeconds: 86_400,
  enabled: false,
  source: { type: 'files', path: src },
});

const signer = w.e.app.keys.signer;
const signerPub = join(dir, 'engine-signer.pub');
writeFileSync(signerPub, encodeKeyFile('signer-public', signer.publicKey));

/** What must never appear in a report or a PDF. */
const SECRETS = [
  ADMIN_TOKEN,
  toBase64Url(signer.secretKey).slice(0, 40),
  toHex(signer.secretKey).slice(0, 40),
  encodeKeyFile('signer-secret', signer.secretKey).split('\n')[4]!.slice(0, 40),
  toBase64Url(w.e.app.keys.operational.secretKey).slice(0, 40),
  'source-secret-path-marker',
];

// biome-ignore lint/suspicious/noExplicitAny: report bodies are read field by field
const replies: Record<string, { raw: string; reply: any; body: any }> = {};
for (const kind of KINDS) {
  const r = await w.get(`/reports/${kind}`);
  if (r.status !== 200) throw new Error(`${kind}: ${r.status} ${r.text}`);
  replies[kind] = { raw: r.text, reply: r.json(), body: JSON.parse(r.json().report) };
}

t.test('each kind is canonical JSON signed by the engine signer under coffer/report/v1', async (t) => {
  for (const kind of KINDS) {
    const { reply, body } = replies[kind]!;
    t.equal(canonicalJson(body), reply.report, `${kind}: the report text is canonical`);
    t.ok(
      verify(
        signer.publicKey,
        new TextEncoder().encode(reply.report),
        fromBase64Url(reply.signature),
        CONTEXT,
      ),
      `${kind}: the signature verifies`,
    );
    t.notOk(
      verify(
        signer.publicKey,
        new TextEncoder().encode(reply.report),
        fromBase64Url(reply.signature),
        'coffer/manifest/v1',
      ),
      `${kind}: not valid under another context`,
    );
    t.same(decodeKeyFile(reply.signerPublicKey, 'signer-public').key, signer.publicKey, 'the engine signer');
    t.equal(reply.signerFingerprint, signer.fingerprint);
    t.match(body, {
      v: 1,
      kind,
      engineVersion: String,
      generatedAt: String,
      period: { from: String, to: String },
      signerFingerprint: signer.fingerprint,
    });
    t.equal(
      Date.parse(body.period.to) - Date.parse(body.period.from),
      30 * 86_400_000,
      `${kind}: the default period is 30 days`,
    );
    t.match(reply.verification, /coffer-recover verify-report --report/);
    t.match(reply.verification, new RegExp(signer.fingerprint.replace(/[:]/g, '.')));
    t.match(reply.verification, /_RECOVERY\/signer\.pub/);
  }
});

t.test('backup-coverage: per job schedule, last success, copies, retention, runs, verdict', async (t) => {
  const { data } = replies['backup-coverage']!.body;
  t.same(
    data.jobs.map((j: { job: string }) => j.job),
    ['broken', 'docs', 'idle'],
  );
  const [broken, docs, idle] = data.jobs;
  t.match(docs, {
    job: 'docs',
    name: 'Team documents',
    enabled: true,
    sourceType: 'files',
    schedule: { cadenceSeconds: 3600, staleAfterSeconds: 7200 },
    lastSuccess: { runId: okRunId, ageSeconds: Number },
    destinations: [{ id: 'default', state: 'verified', lastVerified: { runId: okRunId }, verifiedCopies: 1 }],
    retention: { keepLast: 7, keepDays: null },
    retained: { count: 1 },
    runsInPeriod: { total: 1, ok: 1, failed: 0 },
    verdict: 'covered',
  });
  t.match(broken, {
    job: 'broken',
    lastSuccess: null,
    runsInPeriod: { total: 1, ok: 0, failed: 1 },
    verdict: 'never-run',
  });
  t.match(idle, {
    job: 'idle',
    enabled: false,
    retained: null,
    runsInPeriod: { total: 0 },
    verdict: 'never-run',
  });
  t.same(data.summary, { jobs: 3, covered: 1, stale: 0, neverRun: 2 });
});

t.test('restore-drills: drill history, last verdict, measured restore time, RTO', async (t) => {
  const { data } = replies['restore-drills']!.body;
  const docs = data.jobs.find((j: { job: string }) => j.job === 'docs');
  t.match(docs, {
    name: 'Team documents',
    drillsInPeriod: { total: 1, pass: 1, fail: 0, error: 0, listed: [{ id: drill.id, runId: okRunId }] },
    lastDrill: { id: drill.id, verdict: 'pass' },
    lastPass: { id: drill.id },
    measuredRestoreSeconds: drill.durationMs / 1000,
    rto: { status: 'estimated', seconds: Number },
  });
  t.match(
    data.jobs.find((j: { job: string }) => j.job === 'broken'),
    {
      lastDrill: null,
      rto: { status: 'unknown' },
    },
  );
  t.match(data.fleetRto, { status: 'partial', jobsUnknown: ['broken', 'idle'] });
  t.same(data.summary, { jobs: 3, drilledInPeriod: 1, lastDrillPassing: 1, neverDrilled: 2 });
  const rto = (await w.get('/rto')).json();
  t.equal(
    docs.rto.seconds,
    rto.jobs.find((j: { job: string }) => j.job === 'docs').seconds,
    'same as /admin/rto',
  );
});

t.test('audit-attestation: head, earliest seq and the verifier result', async (t) => {
  const { data } = replies['audit-attestation']!.body;
  const verified = (await w.get('/audit/verify')).json();
  t.equal(verified.ok, true);
  t.match(data, {
    head: { seq: verified.headSeq, hash: verified.headHash },
    earliestSeq: 1,
    anchored: true,
    verification: { ok: true, eventsChecked: verified.count, headSeq: verified.headSeq },
  });
  t.ok(data.head.seq > 3, 'the chain holds the runs and the drill');
});

t.test('coffer-recover verify-report checks each kind offline', async (t) => {
  for (const kind of KINDS) {
    const file = join(dir, `${kind}.json`);
    writeFileSync(file, replies[kind]!.raw);
    const ok = await runCli(['verify-report', '--report', file, '--signer', signerPub]);
    t.equal(ok.code, 0, `${kind}: ${ok.stderr}`);
    t.match(ok.stdout, new RegExp(`report verified: ${kind}`));
    t.match(ok.stdout, signer.fingerprint);
    const pinned = await runCli([
      'verify-report',
      '--report',
      file,
      '--pin-signer',
      signer.fingerprint,
      '--json',
    ]);
    t.equal(pinned.code, 0, pinned.stderr);
    t.match(JSON.parse(pinned.stdout), { ok: true, verified: true, kind, signer: signer.fingerprint });
  }
  const cov = await runCli([
    'verify-report',
    '--report',
    join(dir, 'backup-coverage.json'),
    '--signer',
    signerPub,
  ]);
  t.match(cov.stdout, /summary: covered 1, jobs 3, neverRun 2, stale 0/);
  const audit = await runCli([
    'verify-report',
    '--report',
    join(dir, 'audit-attestation.json'),
    '--signer',
    signerPub,
  ]);
  t.match(audit.stdout, /audit chain: intact/);

  const file = join(dir, 'backup-coverage.json');
  const unpinned = await runCli(['verify-report', '--report', file]);
  t.equal(unpinned.code, 10, 'no signer given: refused, naming the fingerprint');
  t.match(unpinned.stderr, signer.fingerprint);
  const other = generateSigner();
  const otherPub = join(dir, 'other.pub');
  writeFileSync(otherPub, encodeKeyFile('signer-public', other.publicKey));
  const wrongKey = await runCli(['verify-report', '--report', file, '--signer', otherPub]);
  t.equal(wrongKey.code, 3, 'another signer key: the signature does not verify');
  const wrongPin = await runCli([
    'verify-report',
    '--report',
    file,
    '--pin-signer',
    fingerprint(other.publicKey),
  ]);
  t.equal(wrongPin.code, 8, 'another pinned fingerprint');
  const notAKey = await runCli(['verify-report', '--report', file, '--signer', file]);
  t.equal(notAKey.code, 4, 'a signer file that is no key');
  const usage = await runCli(['verify-report', '--signer', signerPub]);
  t.equal(usage.code, 2, '--report is required');
});

t.test('a tampered report fails verification', async (t) => {
  const { reply } = replies['backup-coverage']!;
  const enc = (s: string) => new TextEncoder().encode(s);
  const variants: Array<[string, Record<string, unknown>]> = [];
  // One byte of the body (a digit of generatedAt).
  const i = reply.report.indexOf('"generatedAt":"') + 16;
  const flipped =
    reply.report.slice(0, i) + (reply.report[i] === '1' ? '2' : '1') + reply.report.slice(i + 1);
  variants.push(['one byte of the body', { ...reply, report: flipped }]);
  // One byte in each half of the signature: Ed25519 (bytes 1..64), ML-DSA-87 (65..).
  for (const [half, at] of [
    ['Ed25519 half', 10],
    ['ML-DSA-87 half', 3000],
  ] as const) {
    const sig = fromBase64Url(reply.signature);
    sig[at] = sig[at]! ^ 0x01;
    variants.push([`one byte of the ${half}`, { ...reply, signature: toBase64Url(sig) }]);
  }
  // Validly signed by the engine's key, but not canonical: refused all the same.
  const loose = JSON.stringify(JSON.parse(reply.report), null, 1);
  variants.push([
    'a non-canonical body re-signed',
    { ...reply, report: loose, signature: toBase64Url(sign(signer.secretKey, enc(loose), CONTEXT)) },
  ]);
  // Another signer re-signs the body: its fingerprint in the body still names the engine.
  const other = generateSigner();
  variants.push([
    'another signer',
    {
      ...reply,
      signature: toBase64Url(sign(other.secretKey, enc(reply.report), CONTEXT)),
      signerPublicKey: encodeKeyFile('signer-public', other.publicKey),
    },
  ]);
  for (const [label, doc] of variants) {
    const file = join(dir, `tampered-${label.replace(/\W+/g, '-')}.json`);
    writeFileSync(file, JSON.stringify(doc));
    if (label !== 'a non-canonical body re-signed' && label !== 'another signer')
      t.notOk(
        verify(signer.publicKey, enc(doc.report as string), fromBase64Url(doc.signature as string), CONTEXT),
        `${label}: @coffer/crypto refuses it`,
      );
    const r = await runCli(['verify-report', '--report', file, '--signer', signerPub]);
    t.equal(r.code, 3, `${label}: coffer-recover exits 3`);
    t.match(r.stderr, /verify-report: .*\[ERR_RECOVER_VERIFY_FAILED\]/, label);
    t.notMatch(r.stdout, /report verified/, label);
  }
  const pinnedOther = await runCli([
    'verify-report',
    '--report',
    join(dir, 'tampered-another-signer.json'),
    '--pin-signer',
    fingerprint(other.publicKey),
  ]);
  t.equal(pinnedOther.code, 3, 'pinned to the other key: the body names the engine, refused');
  t.match(pinnedOther.stderr, /names another signer/);
  writeFileSync(join(dir, 'garbage.json'), '{"nope":1}');
  t.equal(
    (await runCli(['verify-report', '--report', join(dir, 'garbage.json'), '--signer', signerPub])).code,
    3,
  );
});

t.test('the reports.read gate, unknown kinds and bad periods', async (t) => {
  const anon = await http(`${w.e.url}/admin/reports/backup-coverage`);
  t.equal(anon.status, 401, 'no credential');
  const unknown = await w.get('/reports/everything');
  t.equal(unknown.status, 404);
  t.match(unknown.json(), { error: /backup-coverage, restore-drills, audit-attestation/, kinds: KINDS });
  for (const q of [
    'from=yesterday',
    'to=2026-13-01',
    'from=2026-02-31',
    'from=2026-01-02&to=2026-01-01',
    'from=2020-01-01&to=2026-01-01',
    `to=${new Date(Date.now() + 86_400_000).toISOString()}`,
    'format=xml',
  ]) {
    const r = await w.get(`/reports/backup-coverage?${q}`);
    t.equal(r.status, 400, q);
    t.match(r.json(), { error: String }, q);
  }
});

t.test('a period before the runs: nothing ran yet, as of its end', async (t) => {
  const r = await w.get('/reports/backup-coverage?from=2025-01-01&to=2025-02-01T00:00:00Z');
  t.equal(r.status, 200, r.text);
  const body = JSON.parse(r.json().report);
  t.same(body.period, { from: '2025-01-01T00:00:00.000Z', to: '2025-02-01T00:00:00.000Z' });
  t.same(body.data.summary, { jobs: 3, covered: 0, stale: 0, neverRun: 3 });
  t.equal(body.data.jobs[1].runsInPeriod.total, 0);
  const drills = JSON.parse(
    (await w.get('/reports/restore-drills?from=2025-01-01&to=2025-02-01')).json().report,
  );
  t.match(drills.data.jobs[1], { job: 'docs', lastDrill: null, rto: { status: 'unknown' } });
});

t.test('?format=pdf: a real PDF with the content and no checkable signature', async (t) => {
  const res = await fetch(`${w.e.url}/admin/reports/backup-coverage?format=pdf`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/pdf');
  t.match(
    res.headers.get('content-disposition'),
    /^attachment; filename="coffer-report-backup-coverage-\d{4}-\d{2}-\d{2}\.pdf"$/,
  );
  const bytes = new Uint8Array(await res.arrayBuffer());
  t.equal(Buffer.from(bytes.subarray(0, 5)).toString('latin1'), '%PDF-');
  const pdf = await pdfText(bytes);
  t.equal(pdf.title, 'Coffer report: Backup coverage');
  for (const s of ['docs', 'Team documents', 'broken', 'Gone away', 'idle', 'COVERED', 'NEVER-RUN', okRunId])
    t.match(pdf.text, s, `the PDF names ${s}`);
  t.match(pdf.text, 'This PDF carries no checkable signature.');
  t.match(pdf.text, 'GET /admin/reports/backup-coverage (JSON)');
  t.match(pdf.text, signer.fingerprint.slice(0, 20), 'names the signer of the JSON form');

  const drills = await pdfText(
    new Uint8Array(
      await (
        await fetch(`${w.e.url}/admin/reports/restore-drills?format=pdf`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).arrayBuffer(),
    ),
  );
  for (const s of [
    'Team documents',
    'PASS',
    'NEVER DRILLED',
    'RTO estimate: estimated',
    'no checkable signature',
  ])
    t.match(drills.text, s, `drills PDF: ${s}`);
  const audit = await pdfText(
    new Uint8Array(
      await (
        await fetch(`${w.e.url}/admin/reports/audit-attestation?format=pdf`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).arrayBuffer(),
    ),
  );
  t.match(audit.text, 'CHAIN INTACT');
  t.match(audit.text, 'no checkable signature');
  for (const secret of SECRETS) {
    t.notMatch(pdf.text + drills.text + audit.text, secret, 'no secret in a PDF');
    t.notOk(Buffer.from(bytes).includes(secret), 'no secret in the PDF bytes');
  }
});

t.test('no secret in any signed report', async (t) => {
  for (const kind of KINDS)
    for (const secret of SECRETS)
      t.notOk(replies[kind]!.raw.includes(secret), `${kind}: no ${secret.slice(0, 12)}...`);
});

t.test('a broken audit chain is attested as broken, signed, and raises audit-chain-break', async (t) => {
  const raised: Array<{ name: string; detail: unknown }> = [];
  const unsubscribe = w.e.app.events.subscribe((e) => {
    raised.push({ name: e.name, detail: e.detail });
  });
  t.teardown(unsubscribe);
  // Edit one stored event directly in the SQLite file, as an attacker with the database would.
  const db = new DatabaseSync(join(w.e.dataDir, 'state.sqlite'));
  const row = db.prepare('SELECT event FROM audit_events WHERE seq = 2').get() as { event: string };
  const edited = JSON.parse(row.event);
  edited.outcome = edited.outcome === 'applied' ? 'refused' : 'applied';
  db.prepare('UPDATE audit_events SET event = ? WHERE seq = 2').run(JSON.stringify(edited));
  db.close();

  const r = await w.get('/reports/audit-attestation');
  t.equal(r.status, 200, 'a break is a report, not an error');
  const body = JSON.parse(r.json().report);
  t.match(body.data, {
    earliestSeq: null,
    verification: { ok: false, firstBadSeq: 2, problem: 'hash-mismatch', lastGood: { seq: 1 } },
  });
  const file = join(dir, 'broken-audit.json');
  writeFileSync(file, r.text);
  const cli = await runCli(['verify-report', '--report', file, '--signer', signerPub]);
  t.equal(cli.code, 0, 'the report itself is authentic');
  t.match(cli.stdout, /audit chain: BROKEN at seq 2 \(hash-mismatch\)/);
  const pdf = await pdfText(
    new Uint8Array(
      await (
        await fetch(`${w.e.url}/admin/reports/audit-attestation?format=pdf`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).arrayBuffer(),
    ),
  );
  t.match(pdf.text, 'CHAIN BROKEN at seq 2 (hash-mismatch)');
  for (let i = 0; i < 100 && raised.filter((e) => e.name === 'audit-chain-break').length < 2; i++)
    await new Promise((res) => setTimeout(res, 10));
  t.match(
    raised.filter((e) => e.name === 'audit-chain-break'),
    [
      { detail: { firstBadSeq: 2, problem: 'hash-mismatch' } },
      { detail: { firstBadSeq: 2, problem: 'hash-mismatch' } },
    ],
    'raised for the JSON and the PDF report',
  );
});
