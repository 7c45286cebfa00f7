/**
 * The preflight (`GET /admin/preflight`, docs/posture.md "Preflight"): live probes grouped by what
 * they check, each with its status in words and a mark (never colour alone), its evidence and the
 * engine's remediation sentence, the overall summary and a re-run. The engine shares concurrent
 * runs and rate-limits each caller, so the screen runs it once on opening and again only on request.
 */
import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client.ts';
import { ErrorBox, formatTime, Loading, Notice } from '../../components/ui.tsx';
import { PREFLIGHT_KEY, type PreflightItem, type PreflightReport, type PreflightStatus } from './types.ts';

export const STATUS_WORDS: Record<PreflightStatus, { mark: string; label: string; meaning: string }> = {
  verified: { mark: '✓', label: 'Verified', meaning: 'probed live just now and found working' },
  configured: {
    mark: '◐',
    label: 'Configured',
    meaning: 'set, but nothing the engine can reach proves it works',
  },
  unconfigured: { mark: '○', label: 'Not configured', meaning: 'optional and not set' },
  failed: { mark: '✗', label: 'Failed', meaning: 'required and missing, or probed and not working' },
};

const GROUPS: { title: string; match: (id: string) => boolean }[] = [
  { title: 'Destinations', match: (id) => id.startsWith('destination:') },
  { title: 'Keys', match: (id) => id.startsWith('keys.') },
  {
    title: 'Engine',
    match: (id) => ['clock', 'state.durable', 'scheduler.tick', 'canary', 'restore-roots'].includes(id),
  },
  {
    title: 'Mail, sign-in and updates',
    match: (id) =>
      id === 'smtp' || id === 'update-channel' || id === 'identity-providers' || id.startsWith('idp:'),
  },
];

function groupItems(items: PreflightItem[]): { title: string; items: PreflightItem[] }[] {
  const groups = GROUPS.map((g) => ({ title: g.title, items: items.filter((i) => g.match(i.id)) }));
  const other = items.filter((i) => !GROUPS.some((g) => g.match(i.id)));
  if (other.length > 0) groups.push({ title: 'Other checks', items: other });
  return groups.filter((g) => g.items.length > 0);
}

export function StatusBadge({ status }: { status: PreflightStatus }) {
  const w = STATUS_WORDS[status];
  return (
    <span className={`posture-badge posture-${status}`} data-status={status}>
      <span aria-hidden="true">{w.mark} </span>
      {w.label}
    </span>
  );
}

function value(v: unknown): string {
  if (v === null || v === undefined) return '–';
  if (Array.isArray(v)) return v.map(value).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function Item({ item }: { item: PreflightItem }) {
  const evidence = Object.entries(item.evidence ?? {});
  return (
    <li className={`panel posture-item posture-item-${item.status}`} data-item={item.id}>
      <div className="posture-item-head">
        <h4>{item.title}</h4>
        <StatusBadge status={item.status} />
      </div>
      {evidence.length > 0 ? (
        <dl className="facts posture-evidence" aria-label={`Evidence: ${item.title}`}>
          {evidence.map(([k, v]) => (
            <div key={k} className="posture-fact">
              <dt>{k}</dt>
              <dd>
                <code>{value(v)}</code>
              </dd>
            </div>
          ))}
        </dl>
      ) : null}
      {item.remediation ? (
        <p className="posture-remediation">
          <strong>What to do: </strong>
          {item.remediation}
        </p>
      ) : null}
    </li>
  );
}

export function PreflightPanel() {
  const q = useQuery({
    queryKey: PREFLIGHT_KEY,
    queryFn: () => api.get<PreflightReport>('/admin/preflight'),
    // Every run probes destinations and services: only on opening and on request.
    refetchOnWindowFocus: false,
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
  const r = q.data;
  return (
    <section className="panel" aria-labelledby="preflight-title">
      <div className="section-head">
        <h2 id="preflight-title">Preflight</h2>
        <button type="button" disabled={q.isFetching} onClick={() => void q.refetch()}>
          {q.isFetching && r ? 'Running the preflight…' : 'Run the preflight again'}
        </button>
      </div>
      <p className="muted">
        Live probes: each destination is written, read back and cleaned, the keys are exercised, and the mail
        server, sign-in providers and update channel are reached. Nothing here stops a backup or a restore.
      </p>
      {q.isPending ? <Loading what="Running the preflight" /> : null}
      <ErrorBox error={q.error} onRetry={() => void q.refetch()} />
      {r ? (
        <>
          {r.ok ? (
            <Notice kind="ok">
              No check failed ({r.summary.verified} verified of {r.summary.total}).
            </Notice>
          ) : (
            <Notice kind="warn">
              {r.summary.failed} check{r.summary.failed === 1 ? '' : 's'} failed: see what to do under each.
            </Notice>
          )}
          <dl className="facts posture-summary" aria-label="Preflight summary">
            {(Object.keys(STATUS_WORDS) as PreflightStatus[]).map((s) => (
              <div key={s} className="posture-fact">
                <dt>
                  <StatusBadge status={s} />
                </dt>
                <dd data-summary={s}>
                  {r.summary[s]} <span className="muted">({STATUS_WORDS[s].meaning})</span>
                </dd>
              </div>
            ))}
            <div className="posture-fact">
              <dt>Checked</dt>
              <dd>
                {formatTime(r.checkedAt)} in {r.durationMs} ms
              </dd>
            </div>
          </dl>
          {groupItems(r.items).map((g) => (
            <section key={g.title} aria-label={g.title} className="posture-group">
              <h3>{g.title}</h3>
              <ul className="posture-items">
                {g.items.map((i) => (
                  <Item key={i.id} item={i} />
                ))}
              </ul>
            </section>
          ))}
        </>
      ) : null}
    </section>
  );
}
