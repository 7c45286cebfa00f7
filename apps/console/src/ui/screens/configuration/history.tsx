/**
 * The configuration history (`GET /admin/config/history`, `GET /admin/config/version?id=`,
 * docs/config-control.md "History"): signed, hash-chained versions newest first, a page at a time,
 * the chain head, a visible alarm when the chain is broken (where and why), each version's
 * signature verdict, and one version opened to show the configuration it recorded.
 */
import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { api } from '../../api/client.ts';
import type { Whoami } from '../../auth/session.tsx';
import { ErrorBox, formatTime, Loading, Modal } from '../../components/ui.tsx';
import { TableRegion } from '../admin/common.tsx';
import { fieldLabel } from '../jobs/model.ts';
import {
  CHAIN_REASON,
  HISTORY_KEY,
  type HistoryView,
  kindText,
  personText,
  type VersionView,
  versionKey,
} from './types.ts';

const PAGE = 20;
const short = (hash: string | undefined) => (hash ? `${hash.slice(0, 19)}…` : '–');

function VersionDetail({ id, who }: { id: number; who: Whoami }) {
  const v = useQuery({
    queryKey: versionKey(id),
    queryFn: () => api.get<VersionView>(`/admin/config/version?id=${id}`),
  });
  if (v.isPending) return <Loading what={`Loading version ${id}`} />;
  if (v.error) return <ErrorBox error={v.error} onRetry={() => void v.refetch()} />;
  const { record, config, verification, signer } = v.data;
  return (
    <div className="cfg-version" data-version={id}>
      {verification.ok ? (
        <p className="msg msg-ok" role="status">
          Verified: the hash, the engine's signature (context <code>{verification.context}</code>) and the
          kept configuration all check out.
        </p>
      ) : (
        <p className="msg msg-error" role="alert">
          Does not verify ({verification.fault ?? 'unknown fault'}); signature{' '}
          {verification.signature ? 'valid' : 'invalid'}.
        </p>
      )}
      {record ? (
        <dl className="facts">
          <dt>What</dt>
          <dd>
            {kindText(record.kind)}: {record.target ?? '–'}
          </dd>
          <dt>When</dt>
          <dd>{formatTime(record.at)}</dd>
          <dt>Written by</dt>
          <dd>{personText(record.actor, who)}</dd>
          <dt>Approved by</dt>
          <dd>{record.approver ? personText(record.approver, who) : 'nobody (a direct write)'}</dd>
          {record.changeId ? (
            <>
              <dt>Change</dt>
              <dd className="mono cfg-break">{record.changeId}</dd>
            </>
          ) : null}
          <dt>Job revision</dt>
          <dd>{record.configRev ?? '–'}</dd>
          <dt>Changed</dt>
          <dd>{record.changedFields?.length ? record.changedFields.map(fieldLabel).join(', ') : '–'}</dd>
          <dt>Hash</dt>
          <dd className="mono cfg-break">{record.hash ?? '–'}</dd>
          <dt>Previous hash</dt>
          <dd className="mono cfg-break">{record.prevHash ?? '–'}</dd>
          <dt>Signer</dt>
          <dd className="mono cfg-break">{signer ?? '–'}</dd>
        </dl>
      ) : null}
      <h3>Configuration recorded</h3>
      {config === null ? (
        <p className="muted">None (a deletion).</p>
      ) : (
        <pre className="cfg-json" data-config-of={id}>
          {JSON.stringify(config, null, 2)}
        </pre>
      )}
    </div>
  );
}

export function HistoryPanel({ who }: { who: Whoami }) {
  const headingId = useId();
  // The `before` cursor of each page seen so far (null = the newest page).
  const [cursors, setCursors] = useState<(number | null)[]>([null]);
  const before = cursors[cursors.length - 1] ?? null;
  const [open, setOpen] = useState<number | null>(null);
  const history = useQuery({
    queryKey: [...HISTORY_KEY, before],
    queryFn: () =>
      api.get<HistoryView>(
        `/admin/config/history?limit=${PAGE}${before === null ? '' : `&before=${before}`}`,
      ),
  });
  const data = history.data;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>History</h2>
      <p className="muted">
        Every applied configuration version, signed by the engine and chained by hash to the one before it.
      </p>
      {history.isPending ? <Loading what="Loading the configuration history" /> : null}
      <ErrorBox error={history.error} onRetry={() => void history.refetch()} />
      {data ? (
        <>
          {data.chain.ok ? (
            <p className="msg msg-ok cfg-chain" role="status" data-chain="ok">
              The chain is unbroken: {data.chain.checked} version{data.chain.checked === 1 ? '' : 's'} checked
              {data.head ? (
                <>
                  , head version {data.head.id}{' '}
                  <span className="mono cfg-break">{short(data.head.hash)}</span>
                </>
              ) : null}
              .
            </p>
          ) : (
            <div className="msg msg-error cfg-chain" role="alert" data-chain="broken">
              <strong>The configuration history is broken at version {data.chain.brokenAt ?? '?'}</strong>:{' '}
              {CHAIN_REASON[data.chain.reason ?? ''] ?? data.chain.reason ?? 'unknown reason'} (
              <code>{data.chain.reason}</code>). {data.chain.checked} version
              {data.chain.checked === 1 ? '' : 's'} before it verified. Someone may have edited the state
              store: check the audit log and the state store's backups.
            </div>
          )}
          <p className="muted">
            Signer <span className="mono cfg-break">{data.signer.fingerprint}</span>
          </p>
          {data.versions.length === 0 ? (
            <p className="muted">No configuration version yet.</p>
          ) : (
            <TableRegion label="Configuration versions, newest first">
              <table className="cfg-table">
                <thead>
                  <tr>
                    <th scope="col">Version</th>
                    <th scope="col">What</th>
                    <th scope="col">Written by</th>
                    <th scope="col">Approved by</th>
                    <th scope="col">Signature</th>
                  </tr>
                </thead>
                <tbody>
                  {data.versions.map((v) => (
                    <tr key={v.id} data-version-id={v.id}>
                      <th scope="row">
                        <button
                          type="button"
                          className="link"
                          aria-label={`Open version ${v.id}`}
                          onClick={() => setOpen(v.id)}
                        >
                          {v.id}
                        </button>
                        <div className="muted">{formatTime(v.at)}</div>
                      </th>
                      <td>
                        {kindText(v.kind)}: {v.target ?? '–'}
                        {v.changedFields?.length ? (
                          <div className="muted">{v.changedFields.map(fieldLabel).join(', ')}</div>
                        ) : null}
                      </td>
                      <td>{personText(v.actor, who)}</td>
                      <td>
                        {v.approver ? personText(v.approver, who) : <span className="muted">direct</span>}
                      </td>
                      <td>
                        {v.verified ? (
                          <span className="status status-ok">verified</span>
                        ) : (
                          <span className="status status-failed">fails: {v.fault ?? 'unknown'}</span>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableRegion>
          )}
          <div className="row">
            {cursors.length > 1 ? (
              <button type="button" onClick={() => setCursors((c) => c.slice(0, -1))}>
                Newer versions
              </button>
            ) : null}
            {data.nextBefore !== null ? (
              <button type="button" onClick={() => setCursors((c) => [...c, data.nextBefore])}>
                Older versions
              </button>
            ) : null}
          </div>
        </>
      ) : null}
      <Modal open={open !== null} title={`Configuration version ${open ?? ''}`} onClose={() => setOpen(null)}>
        {open !== null ? <VersionDetail id={open} who={who} /> : null}
        <div className="row">
          <button type="button" onClick={() => setOpen(null)}>
            Close
          </button>
        </div>
      </Modal>
    </section>
  );
}
