/**
 * One lifecycle reply shown as a person reads it: the outcome in a sentence, a refusal with its
 * code in plain words and the step that stopped it, and every lifecycle step marked passed,
 * stopped here or not reached (docs/updates.md "Update lifecycle").
 */
import { useId } from 'react';
import { Tag } from '../admin/common.tsx';
import {
  codeText,
  LIFECYCLE_STEPS,
  type LifecycleReply,
  OUTCOME_TEXT,
  stepText,
  versionText,
} from './types.ts';

function stateOf(step: string, r: LifecycleReply): 'passed' | 'stopped' | 'not reached' {
  if (r.passed.includes(step)) return 'passed';
  if (r.step === step) return 'stopped';
  return 'not reached';
}

export function LifecycleResult({ title, reply }: { title: string; reply: LifecycleReply }) {
  const id = useId();
  const refused = reply.outcome === 'refused';
  // The engine's own steps (channel, settle while another update waits) sit outside the table.
  const outside = reply.step !== null && !LIFECYCLE_STEPS.some((s) => s.step === reply.step);
  const showSteps = reply.passed.length > 0 || (reply.step !== null && !outside);
  const targets = reply.record
    ? Object.entries(reply.record.to)
        .map(([c, v]) => `${c} ${versionText(reply.record?.from[c as 'engine'])} → ${v}`)
        .join(', ')
    : null;
  return (
    <section
      className={`panel update-result ${refused ? 'update-refused' : ''}`}
      aria-labelledby={id}
      data-outcome={reply.outcome}
    >
      <h3 id={id}>
        {title}: <Tag kind={refused ? 'refused' : reply.outcome}>{reply.outcome}</Tag>
      </h3>
      {refused ? (
        <p role="alert">
          {reply.step === null ? (
            'Refused'
          ) : (
            <>
              Refused at <strong>{stepText(reply.step)}</strong>
            </>
          )}
          : {codeText(reply.code)}
          {reply.code ? (
            <>
              {' '}
              (<code>{reply.code}</code>)
            </>
          ) : null}
          .
        </p>
      ) : (
        <p role="status">{OUTCOME_TEXT[reply.outcome] ?? reply.outcome}</p>
      )}
      {(reply.error ?? reply.message) ? (
        <p className="muted update-break">Engine: {reply.error ?? reply.message}</p>
      ) : null}
      {reply.approvalRequired && reply.outcome !== 'queued' ? (
        <p className="msg msg-info">
          Under the update-approval policy a live apply of this release waits for a second owner.
        </p>
      ) : null}
      {reply.orchestrator ? <p className="msg msg-info update-break">{reply.orchestrator.message}</p> : null}
      {targets ? <p>Versions: {targets}</p> : null}
      {showSteps ? (
        <ol className="update-steps" aria-label={`${title}: lifecycle steps`}>
          {LIFECYCLE_STEPS.map((s) => {
            const st = stateOf(s.step, reply);
            return (
              <li
                key={s.step}
                data-step={s.step}
                data-state={st}
                className={`update-step-${st.replace(' ', '-')}`}
              >
                <span className="update-mark" aria-hidden="true">
                  {st === 'passed' ? '✓' : st === 'stopped' ? (refused ? '✗' : '■') : '·'}
                </span>{' '}
                {s.text}{' '}
                <span className="muted">
                  ({st === 'stopped' ? (refused ? 'refused here' : 'stopped here') : st})
                </span>
              </li>
            );
          })}
        </ol>
      ) : null}
    </section>
  );
}
