/**
 * The current update record (`GET /admin/update/status`, docs/updates.md "Update record") and what
 * an owner does with it: settle an apply with a canary verdict, roll back all of its components or
 * one, settle a ramp (with the deploy token). The engine decides whether each applies; a refusal is
 * shown with its code and step in plain words. Anyone with `job.read` sees the record.
 */
import { Fragment, useId, useState } from 'react';
import { formatTime } from '../../components/ui.tsx';
import { ConfirmButton, Tag } from '../admin/common.tsx';
import { LifecycleResult } from './result.tsx';
import { sendWithToken } from './steps.ts';
import { codeText, type LifecycleReply, stepText, type UpdateRecord, versionText } from './types.ts';

const PHASE_TEXT: Record<string, string> = {
  uploading: 'uploaded inert (nothing live changed)',
  promoting: 'promoting',
  settling: 'promoted, canary flights running',
  'awaiting-canary': 'promoted, awaiting the scheduled canary',
  ramping: 'ramping',
  'rolling-back': 'rolling back',
  done: 'done',
};

function RecordFacts({ record }: { record: UpdateRecord }) {
  return (
    <dl className="facts">
      <dt>Status</dt>
      <dd>
        <Tag kind={record.status === 'refused' ? 'refused' : record.status === 'pending' ? 'pending' : 'ok'}>
          {record.status}
        </Tag>
        {record.outcome ? (
          <>
            {' '}
            · outcome <Tag kind={record.outcome === 'applied' ? 'applied' : 'refused'}>{record.outcome}</Tag>
          </>
        ) : null}
      </dd>
      <dt>Phase</dt>
      <dd>{PHASE_TEXT[record.phase] ?? record.phase}</dd>
      {record.refusal ? (
        <>
          <dt>Refused</dt>
          <dd>
            at {stepText(record.refusal.step)}: {codeText(record.refusal.code)} (
            <code>{record.refusal.code}</code>)
          </dd>
        </>
      ) : null}
      <dt>Kind</dt>
      <dd>{record.shape === 'ramp' ? `ramp (${record.ramp?.percentage ?? '?'}% of replicas)` : 'apply'}</dd>
      {record.components.map((c) => (
        <Fragment key={c}>
          <dt>{c}</dt>
          <dd>
            {versionText(record.from[c])} → {versionText(record.to[c])}
          </dd>
        </Fragment>
      ))}
      <dt>Risk</dt>
      <dd>
        {record.risk}
        {record.migration ? ', migrates the state store' : ''}
      </dd>
      <dt>Schema epoch</dt>
      <dd>
        {record.fromSchemaEpoch} → {record.toSchemaEpoch}
      </dd>
      <dt>Read-back</dt>
      <dd>
        {record.readBack.mode}
        {record.readBack.mismatched.length > 0
          ? `; mismatched: ${record.readBack.mismatched.join(', ')}`
          : '; every uploaded component read back as signed'}
      </dd>
      {record.rollbackFailed.length > 0 ? (
        <>
          <dt>Rollback failed for</dt>
          <dd>{record.rollbackFailed.join(', ')}</dd>
        </>
      ) : null}
      <dt>Channel</dt>
      <dd>sequence {record.channel.sequence}</dd>
      <dt>Record</dt>
      <dd>
        <span className="mono">{record.id}</span>, started {formatTime(record.createdAt)}, changed{' '}
        {formatTime(record.updatedAt)}
      </dd>
    </dl>
  );
}

export function RecordPanel({
  record,
  mayWrite,
  token,
  setToken,
  onReply,
}: {
  record: UpdateRecord | null;
  mayWrite: boolean;
  token: string;
  setToken: (t: string) => void;
  onReply: (r: LifecycleReply) => Promise<void>;
}) {
  const headingId = useId();
  const [reply, setReply] = useState<{ title: string; reply: LifecycleReply } | null>(null);

  const act = async (title: string, path: string, body: Record<string, unknown>, live = false) => {
    setReply(null);
    const r = await sendWithToken(path, body, live, token, () => setToken(''));
    setReply({ title, reply: r });
    await onReply(r);
  };

  const open = record !== null && record.status === 'pending';
  const rollbackable = record !== null && record.status !== 'refused';
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Current update</h2>
      {record === null ? (
        <p className="muted">No update on record yet.</p>
      ) : (
        <div className="panel" data-record-status={record.status} data-record-phase={record.phase}>
          <RecordFacts record={record} />
          {mayWrite ? (
            <div className="cell-actions">
              {open && record.shape === 'apply' ? (
                <>
                  <ConfirmButton
                    label="Settle: it works"
                    title="Settle the update as alive?"
                    confirmLabel="Settle as alive"
                    action={() => act('Settle', '/admin/update/settle', { verdict: 'alive' })}
                  >
                    <p>The update is settled applied and the anti-rollback floor rises to its versions.</p>
                  </ConfirmButton>
                  <ConfirmButton
                    label="Settle: it is broken"
                    title="Settle the update as dead?"
                    confirmLabel="Settle as dead and roll back"
                    danger
                    action={() => act('Settle', '/admin/update/settle', { verdict: 'dead' })}
                  >
                    <p>The engine rolls every component of this update back to the versions it replaced.</p>
                  </ConfirmButton>
                  <ConfirmButton
                    label="Still undecided"
                    title="Keep the update awaiting the canary?"
                    confirmLabel="Keep awaiting"
                    action={() => act('Settle', '/admin/update/settle', { verdict: 'undecided' })}
                  >
                    <p>The new version stays live; the scheduled canary decides.</p>
                  </ConfirmButton>
                </>
              ) : null}
              {open && record.shape === 'ramp' ? (
                <>
                  <ConfirmButton
                    label="Settle ramp: it works"
                    title="Promote the ramp to every replica?"
                    confirmLabel="Settle ramp as alive"
                    action={() => act('Ramp settle', '/admin/update/ramp/settle', { verdict: 'alive' }, true)}
                  >
                    <p>Every replica follows the new version. Needs the deploy token (used up).</p>
                  </ConfirmButton>
                  <ConfirmButton
                    label="Settle ramp: it is broken"
                    title="Roll the ramp back?"
                    confirmLabel="Settle ramp as dead"
                    danger
                    action={() => act('Ramp settle', '/admin/update/ramp/settle', { verdict: 'dead' }, true)}
                  >
                    <p>The replicas go back to the previous version. Needs the deploy token (used up).</p>
                  </ConfirmButton>
                </>
              ) : null}
              {rollbackable ? (
                <>
                  <ConfirmButton
                    label="Roll back"
                    accessibleLabel="Roll back every component"
                    title="Roll back every component of this update?"
                    confirmLabel="Roll back"
                    danger
                    action={() => act('Rollback', '/admin/update/rollback', {})}
                  >
                    <p>
                      Back to {record.components.map((c) => `${c} ${versionText(record.from[c])}`).join(', ')}
                      . The floor stays where it is: nothing older than it can be applied later.
                    </p>
                  </ConfirmButton>
                  {record.components.length > 1
                    ? record.components.map((c) => (
                        <ConfirmButton
                          key={c}
                          label={`Roll back ${c}`}
                          accessibleLabel={`Roll back the ${c} only`}
                          title={`Roll back the ${c} only?`}
                          confirmLabel={`Roll back ${c}`}
                          danger
                          action={() => act('Rollback', '/admin/update/rollback', { component: c })}
                        >
                          <p>
                            The {c} goes back to {versionText(record.from[c])}
                            {c === 'engine' ? '; never across a schema epoch' : ''}.
                          </p>
                        </ConfirmButton>
                      ))
                    : null}
                </>
              ) : null}
            </div>
          ) : null}
        </div>
      )}
      {reply ? <LifecycleResult title={reply.title} reply={reply.reply} /> : null}
    </section>
  );
}
