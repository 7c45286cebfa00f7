/**
 * Reports (docs/reports.md, docs/console.md "Reports"; `reports.read`, every built-in role): choose a
 * kind and a period (UTC days, the last 30 by default), read the report's main figures, download
 * the signed JSON exactly as the engine sent it (so `coffer-recover verify-report` checks it) and
 * the PDF, and read the verification recipe the engine returns. A PDF carries no checkable signature.
 */
import { useState } from 'react';
import { request, saveBlob } from '../api/client.ts';
import { errorFromResponse } from '../api/errors.ts';
import { ErrorBox, Field, formatTime, Page, useRunner } from '../components/ui.tsx';
import { Figures } from './reports/figures.tsx';
import {
  type Fetched,
  REPORT_KINDS,
  type ReportBody,
  type ReportKind,
  type SignedReply,
} from './reports/types.ts';
import './reports/reports.css';

const DAY = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * The engine's `from`/`to` for a span of whole UTC days, both inclusive: `from` is that day's
 * midnight; `to` is the next midnight, or left out (now) when the last day is today or later, since
 * the engine refuses a `to` in the future.
 */
export function periodQuery(from: string, to: string, now = Date.now()): string {
  const q = new URLSearchParams();
  if (from) q.set('from', from);
  if (to && to < utcDay(now)) q.set('to', utcDay(Date.parse(`${to}T00:00:00Z`) + DAY));
  return q.toString();
}

async function fetchReport(kind: ReportKind, query: string): Promise<Fetched> {
  const res = await request('GET', `/admin/reports/${kind}${query ? `?${query}` : ''}`);
  if (!res.ok) throw await errorFromResponse(res);
  // The exact bytes are kept for the download: re-serialising could change what was signed around.
  const bytes = await res.arrayBuffer();
  const reply = JSON.parse(new TextDecoder().decode(bytes)) as SignedReply;
  const body = JSON.parse(reply.report) as ReportBody;
  return { kind, bytes, reply, body, query };
}

export function Reports() {
  const today = utcDay(Date.now());
  const [kind, setKind] = useState<ReportKind>('backup-coverage');
  const [from, setFrom] = useState(utcDay(Date.now() - 30 * DAY));
  const [to, setTo] = useState(today);
  const [report, setReport] = useState<Fetched | null>(null);
  const { busy, error, run } = useRunner<'view' | 'pdf'>();
  const title = (k: ReportKind) => REPORT_KINDS.find((x) => x.id === k)?.title ?? k;
  const day = report ? report.body.generatedAt.slice(0, 10) : '';

  return (
    <Page title="Reports">
      <p className="screen-intro">
        Evidence for an auditor, an insurer or a manager, signed by the engine so they can check it without
        trusting the engine or whoever hands it over.
      </p>
      <form
        className="panel"
        aria-label="Choose a report"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => setReport(await fetchReport(kind, periodQuery(from, to))), 'view');
        }}
      >
        <fieldset className="fieldset">
          <legend>Kind</legend>
          {REPORT_KINDS.map((k) => (
            <label key={k.id} className="check">
              <input
                type="radio"
                name="report-kind"
                value={k.id}
                checked={kind === k.id}
                onChange={() => setKind(k.id)}
              />{' '}
              {k.title}
            </label>
          ))}
        </fieldset>
        <div className="row">
          <Field label="From (UTC day)">
            {(id) => (
              <input id={id} type="date" value={from} max={today} onChange={(e) => setFrom(e.target.value)} />
            )}
          </Field>
          <Field label="To (UTC day, included)" hint="Today means up to now.">
            {(id, hintId) => (
              <input
                id={id}
                type="date"
                value={to}
                max={today}
                aria-describedby={hintId}
                onChange={(e) => setTo(e.target.value)}
              />
            )}
          </Field>
        </div>
        <button type="submit" className="primary" disabled={busy !== null}>
          {busy === 'view' ? 'Building the report…' : 'View report'}
        </button>
      </form>
      <ErrorBox error={error} />
      {report ? (
        <section className="panel" aria-labelledby="report-title">
          <h2 id="report-title">{title(report.kind)}</h2>
          <dl className="facts">
            <dt>Period</dt>
            <dd>
              {formatTime(report.body.period.from)} to {formatTime(report.body.period.to)}
            </dd>
            <dt>Generated</dt>
            <dd>
              {formatTime(report.body.generatedAt)} by engine {report.body.engineVersion}
            </dd>
            <dt>Signed by</dt>
            <dd>
              <code>{report.reply.signerFingerprint}</code>
            </dd>
          </dl>
          <Figures body={report.body} />
          <div className="row">
            <button
              type="button"
              className="primary"
              onClick={() =>
                saveBlob(
                  new Blob([report.bytes], { type: 'application/json' }),
                  `coffer-report-${report.kind}-${day}.json`,
                )
              }
            >
              Download signed JSON
            </button>
            <button
              type="button"
              disabled={busy !== null}
              onClick={() =>
                void run(async () => {
                  const q = new URLSearchParams(report.query);
                  q.set('format', 'pdf');
                  const res = await request('GET', `/admin/reports/${report.kind}?${q}`);
                  if (!res.ok) throw await errorFromResponse(res);
                  const name =
                    /filename="?([^";]+)"?/.exec(res.headers.get('content-disposition') ?? '')?.[1] ??
                    `coffer-report-${report.kind}.pdf`;
                  saveBlob(await res.blob(), name);
                }, 'pdf')
              }
            >
              {busy === 'pdf' ? 'Making the PDF…' : 'Download PDF'}
            </button>
            <button
              type="button"
              onClick={() =>
                saveBlob(
                  new Blob([report.reply.signerPublicKey], { type: 'text/plain' }),
                  'engine-signer.pub',
                )
              }
            >
              Download the signer public key
            </button>
          </div>
          <p className="reports-note" data-note="pdf">
            The PDF is for reading: it carries no checkable signature. Give the signed JSON to whoever must
            check the report.
          </p>
          <h3>How to verify it</h3>
          <p className="muted">
            Check the signer fingerprint against your own record (the Set-up screen shows it; so does{' '}
            <code>_RECOVERY/signer.pub</code> in any destination): a key inside the file proves nothing by
            itself.
          </p>
          <pre className="reports-recipe" data-recipe="">
            {report.reply.verification}
          </pre>
        </section>
      ) : null}
    </Page>
  );
}
