/**
 * The audit chain (docs/audit.md §6): newest first, filtered by what `GET /admin/audit` supports
 * (action, actor, time window), paged by `beforeSeq`; verify (`GET /admin/audit/verify`: ok, or
 * where the chain breaks) and export (`GET /admin/audit/export?format=json|csv`) as a download.
 */
import { keepPreviousData, useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client.ts';
import { ErrorBox, Field, formatTime, Loading, Notice, Page } from '../components/ui.tsx';
import { TableRegion, Tag } from './admin/common.tsx';
import { AUDIT_ACTIONS, type AuditEvent, type AuditListPage, type AuditVerifyReport } from './admin/types.ts';

interface Filters {
  action: string;
  actor: string;
  since: string;
  until: string;
  limit: string;
}
const EMPTY: Filters = { action: '', actor: '', since: '', until: '', limit: '50' };

/** A `datetime-local` value (the browser's local time) as RFC 3339 UTC, or undefined. */
function toRfc3339(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

function listPath(f: Filters, beforeSeq: number | undefined): string {
  const q = new URLSearchParams();
  if (f.action) q.set('action', f.action);
  if (f.actor.trim()) q.set('actor', f.actor.trim());
  const since = toRfc3339(f.since);
  const until = toRfc3339(f.until);
  if (since) q.set('since', since);
  if (until) q.set('until', until);
  q.set('limit', f.limit);
  if (beforeSeq !== undefined) q.set('beforeSeq', String(beforeSeq));
  return `/admin/audit?${q}`;
}

function actorOf(e: AuditEvent): string {
  return (
    e.actor.email ?? e.actor.subject ?? (e.actor.method === 'admin-token' ? 'admin token' : e.actor.method)
  );
}

function outcomeKind(outcome: string): string {
  if (outcome === 'applied') return 'ok';
  if (outcome === 'refused' || outcome === 'failed') return 'failed';
  if (outcome === 'queued') return 'queued';
  return 'observed';
}

function VerifyResult({ report }: { report: AuditVerifyReport }) {
  if (report.ok)
    return (
      <Notice kind="ok">
        The audit chain verifies: {report.count} event{report.count === 1 ? '' : 's'}
        {report.firstSeq !== null ? ` (seq ${report.firstSeq} to ${report.headSeq})` : ''}, head{' '}
        <code className="mono">{report.headHash.slice(0, 23)}…</code>
        {report.anchored ? '.' : '. Early events were pruned, so the first retained event is not anchored.'}
      </Notice>
    );
  return (
    <Notice kind="warn">
      The audit chain breaks at seq {report.firstBadSeq} ({report.problem}): {report.message}{' '}
      {report.lastGood ? `The last good event is seq ${report.lastGood.seq}.` : ''} {report.count} event
      {report.count === 1 ? '' : 's'} verified before the break.
    </Notice>
  );
}

function EventRow({ e }: { e: AuditEvent }) {
  const hasDetail = Object.keys(e.detail).length > 0;
  return (
    <tr>
      <td>{e.seq}</td>
      <td>
        <time dateTime={e.ts}>{formatTime(e.ts)}</time>
      </td>
      <td>
        <code>{e.action}</code>
      </td>
      <td>
        <Tag kind={outcomeKind(e.outcome)}>{e.outcome}</Tag>
      </td>
      <td>
        <span className="mono">{actorOf(e)}</span>
        {e.role ? <small className="muted"> ({e.role})</small> : null}
        {e.approver ? (
          <>
            <br />
            <small className="muted">approved by {e.approver.email ?? e.approver.subject}</small>
          </>
        ) : null}
      </td>
      <td className="mono">{e.target ?? '–'}</td>
      <td>
        <details className="detail">
          <summary>
            {hasDetail ? 'Detail' : 'Hashes'}
            <span className="sr-only"> of event {e.seq}</span>
          </summary>
          <pre>
            {JSON.stringify(
              {
                ...(hasDetail ? { detail: e.detail } : {}),
                sourceAddress: e.sourceAddress,
                hash: e.hash,
                prevHash: e.prevHash,
              },
              null,
              2,
            )}
          </pre>
        </details>
      </td>
    </tr>
  );
}

export function Audit() {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [applied, setApplied] = useState<Filters>(EMPTY);
  // The cursors of the pages before this one: [] is the newest page.
  const [cursors, setCursors] = useState<number[]>([]);
  const before = cursors.at(-1);
  const list = useQuery({
    queryKey: ['audit', 'list', applied, before ?? null],
    queryFn: () => api.get<AuditListPage>(listPath(applied, before)),
    placeholderData: keepPreviousData,
  });
  const verify = useMutation({ mutationFn: () => api.get<AuditVerifyReport>('/admin/audit/verify') });
  const exporter = useMutation({
    mutationFn: (format: 'json' | 'csv') =>
      api.download(`/admin/audit/export?format=${format}`, `coffer-audit.${format}`),
  });
  const set = (k: keyof Filters) => (ev: { target: { value: string } }) =>
    setDraft((d) => ({ ...d, [k]: ev.target.value }));
  const filtered = applied.action || applied.actor || applied.since || applied.until;
  const page = list.data;

  return (
    <Page
      title="Audit"
      actions={
        <>
          <button type="button" disabled={verify.isPending} onClick={() => verify.mutate()}>
            {verify.isPending ? 'Verifying…' : 'Verify chain'}
          </button>
          <button type="button" disabled={exporter.isPending} onClick={() => exporter.mutate('json')}>
            Export JSON
          </button>
          <button type="button" disabled={exporter.isPending} onClick={() => exporter.mutate('csv')}>
            Export CSV
          </button>
        </>
      }
    >
      <p className="muted">
        Every security-relevant action, hash-chained. Verify recomputes the chain in the engine; an export can
        be verified offline (the CSV is for people, verify the JSON).
      </p>
      <ErrorBox error={verify.error} />
      {verify.data ? <VerifyResult report={verify.data} /> : null}
      <ErrorBox error={exporter.error} />

      <form
        className="filters"
        aria-label="Filter audit events"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(draft);
          setCursors([]);
        }}
      >
        <Field label="Action">
          {(id) => (
            <select id={id} value={draft.action} onChange={set('action')}>
              <option value="">Any action</option>
              {AUDIT_ACTIONS.map((a) => (
                <option key={a} value={a}>
                  {a}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Actor" hint="Exact email or subject">
          {(id, hint) => (
            <input id={id} aria-describedby={hint} value={draft.actor} onChange={set('actor')} />
          )}
        </Field>
        <Field label="From">
          {(id) => <input id={id} type="datetime-local" value={draft.since} onChange={set('since')} />}
        </Field>
        <Field label="To">
          {(id) => <input id={id} type="datetime-local" value={draft.until} onChange={set('until')} />}
        </Field>
        <Field label="Per page">
          {(id) => (
            <select id={id} value={draft.limit} onChange={set('limit')}>
              {['25', '50', '100', '250'].map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          )}
        </Field>
        <div className="row">
          <button type="submit" className="primary">
            Apply filters
          </button>
          <button
            type="button"
            onClick={() => {
              setDraft(EMPTY);
              setApplied(EMPTY);
              setCursors([]);
            }}
          >
            Clear
          </button>
        </div>
      </form>

      {list.isPending ? <Loading what="Loading the audit chain" /> : null}
      <ErrorBox error={list.error} onRetry={() => void list.refetch()} />
      {page ? (
        <>
          <p className="muted" aria-live="polite">
            {list.isPlaceholderData ? (
              'Loading…'
            ) : (
              <>
                Chain head seq {page.headSeq}. Showing {page.count} event{page.count === 1 ? '' : 's'}
                {filtered ? ' matching the filters' : ''}
                {cursors.length > 0 ? `, older than seq ${before}` : ', newest first'}.
              </>
            )}
          </p>
          {page.events.length === 0 ? (
            <Notice>No audit events match.</Notice>
          ) : (
            <TableRegion label="Audit events">
              <table aria-label="Audit events, newest first" aria-busy={list.isPlaceholderData}>
                <thead>
                  <tr>
                    <th scope="col">Seq</th>
                    <th scope="col">Time</th>
                    <th scope="col">Action</th>
                    <th scope="col">Outcome</th>
                    <th scope="col">Actor</th>
                    <th scope="col">Target</th>
                    <th scope="col">More</th>
                  </tr>
                </thead>
                <tbody>
                  {page.events.map((e) => (
                    <EventRow key={e.seq} e={e} />
                  ))}
                </tbody>
              </table>
            </TableRegion>
          )}
          <nav className="pager" aria-label="Audit pages">
            <div className="row">
              <button type="button" disabled={cursors.length === 0} onClick={() => setCursors([])}>
                Newest
              </button>
              <button
                type="button"
                disabled={cursors.length === 0}
                onClick={() => setCursors((c) => c.slice(0, -1))}
              >
                Newer
              </button>
              <button
                type="button"
                disabled={page.nextBeforeSeq === null || list.isFetching}
                onClick={() => {
                  const next = page.nextBeforeSeq;
                  if (next !== null) setCursors((c) => [...c, next]);
                }}
              >
                Older
              </button>
            </div>
            <span className="muted">Page {cursors.length + 1}</span>
          </nav>
        </>
      ) : null}
    </Page>
  );
}
