/**
 * Restore: a wizard over the engine's restore routes. (1) a job and a run (or a time), (2) what
 * and where (selectors, target), the dry run, (3) the plan (counts, bytes, sample, skipped,
 * warnings, plan hash, apply deadline) and the next action the approval policy allows (apply, or
 * request approval and wait), (4) the apply followed to its end, with cancel. Applies running now
 * in the engine are listed above the wizard so one started elsewhere can be followed.
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { api } from '../api/client.ts';
import { Page } from '../components/ui.tsx';
import { ApplyFollow } from './restore/apply-follow.tsx';
import { StatusBadge } from './restore/shared.tsx';
import type { ApplyView, RestorePlan, RestoreRequestBody } from './restore/types.ts';
import {
  EMPTY_SELECTION,
  PlanStep,
  type SelectionChoice,
  SelectionStep,
  type SourceChoice,
  SourceStep,
} from './restore/wizard.tsx';
import './restore/restore.css';

type Step = 'source' | 'selection' | 'plan' | 'apply';
const STEPS: { id: Step; title: string }[] = [
  { id: 'source', title: 'Job and run' },
  { id: 'selection', title: 'What and where' },
  { id: 'plan', title: 'Review the plan' },
  { id: 'apply', title: 'Apply' },
];

export function Restore() {
  const [step, setStep] = useState<Step>('source');
  const [source, setSource] = useState<SourceChoice | null>(null);
  const [selection, setSelection] = useState<SelectionChoice>(EMPTY_SELECTION);
  const [planned, setPlanned] = useState<{ request: RestoreRequestBody; plan: RestorePlan } | null>(null);
  const [applyId, setApplyId] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const first = useRef(true);
  // Each step's heading takes the focus, so keyboard and screen-reader users land on the new step.
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when the step changes
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    heading.current?.focus();
  }, [step]);

  const index = STEPS.findIndex((s) => s.id === step);
  const current = STEPS[index]!;
  const restart = () => {
    setSource(null);
    setSelection(EMPTY_SELECTION);
    setPlanned(null);
    setApplyId(null);
    setStep('source');
  };

  return (
    <Page title="Restore">
      {step !== 'apply' ? (
        <RunningApplies
          onFollow={(id) => {
            setApplyId(id);
            setStep('apply');
          }}
        />
      ) : null}
      <nav aria-label="Restore steps">
        <ol className="steps">
          {STEPS.map((s, i) => (
            <li
              key={s.id}
              aria-current={s.id === step ? 'step' : undefined}
              className={i < index ? 'done' : undefined}
            >
              {s.title}
            </li>
          ))}
        </ol>
      </nav>
      <section className="wizard-step" aria-labelledby="restore-step-title">
        <h2 id="restore-step-title" ref={heading} tabIndex={-1}>
          Step {index + 1} of {STEPS.length}: {current.title}
        </h2>
        {step === 'source' ? (
          <SourceStep
            initial={source}
            onNext={(s) => {
              if (s.runId !== source?.runId || s.job !== source?.job) setPlanned(null);
              if (s.job !== source?.job) setSelection(EMPTY_SELECTION);
              setSource(s);
              setStep('selection');
            }}
          />
        ) : null}
        {step === 'selection' && source ? (
          <SelectionStep
            source={source}
            initial={selection}
            onBack={() => setStep('source')}
            onPlanned={(sel, request, plan) => {
              setSelection(sel);
              setPlanned({ request, plan });
              setStep('plan');
            }}
          />
        ) : null}
        {step === 'plan' && planned ? (
          <PlanStep
            plan={planned.plan}
            request={planned.request}
            onBack={() => setStep('selection')}
            onApplied={(id) => {
              setApplyId(id);
              setStep('apply');
            }}
          />
        ) : null}
        {step === 'apply' && applyId ? (
          <>
            <ApplyFollow applyId={applyId} />
            <div className="row">
              <button type="button" onClick={restart}>
                Start another restore
              </button>
            </div>
          </>
        ) : null}
      </section>
    </Page>
  );
}

/** `GET /admin/restore/applies` (no id): the applies this engine process runs now. */
function RunningApplies({ onFollow }: { onFollow: (applyId: string) => void }) {
  const live = useQuery({
    queryKey: ['restore', 'applies'],
    queryFn: () => api.get<{ applies: ApplyView[] }>('/admin/restore/applies'),
    refetchInterval: 5000,
  });
  const applies = live.data?.applies ?? [];
  if (applies.length === 0) return null;
  return (
    <section className="panel" aria-labelledby="running-applies">
      <h2 id="running-applies">Applies running now</h2>
      <ul className="plain">
        {applies.map((a) => (
          <li key={a.applyId} className="row">
            <code>{a.applyId}</code> <StatusBadge status={a.status} /> {a.job ?? ''}{' '}
            {a.progress ? `${a.progress.done} of ${a.progress.total}` : ''}
            <button type="button" onClick={() => onFollow(a.applyId)}>
              Follow
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
