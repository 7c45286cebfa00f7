/**
 * Configuration (docs/config-control.md, docs/console.md "Configuration"): the two approval
 * policies (configuration and retention-prune approval), the configuration changes and retention
 * prunes waiting for a second person with approve, reject and withdraw, the recently decided
 * changes, and the signed, hash-chained configuration history. Reads are for `posture.read`
 * (every role); owners change the policies (step-up, asked for in place); approving and rejecting
 * need the change's capability, and the proposer never approves their own change.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client.ts';
import { isOwner, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, Loading, Page } from '../components/ui.tsx';
import {
  type Decision,
  DecisionNotice,
  PendingChanges,
  PrunePanel,
  RecentDecisions,
} from './configuration/changes.tsx';
import { HistoryPanel } from './configuration/history.tsx';
import { PoliciesPanel } from './configuration/policies.tsx';
import {
  CHANGES_KEY,
  CONFIG_KEY,
  type ConfigChange,
  POLICY_KEY,
  type PolicyView,
  PRUNES_KEY,
  type PruneView,
} from './configuration/types.ts';
import './configuration/configuration.css';

export function Configuration() {
  const who = useSignedIn();
  const client = useQueryClient();
  const [decision, setDecision] = useState<Decision | null>(null);
  const policy = useQuery({
    queryKey: POLICY_KEY,
    queryFn: () => api.get<PolicyView>('/admin/config/approval-policy'),
  });
  const changes = useQuery({
    queryKey: CHANGES_KEY,
    queryFn: () => api.get<{ changes: ConfigChange[] }>('/admin/config/changes'),
    // Another person's proposal or decision appears without a reload.
    refetchInterval: (q) => (q.state.status === 'error' ? false : 10_000),
  });
  const prunes = useQuery({
    queryKey: PRUNES_KEY,
    queryFn: () => api.get<PruneView>('/admin/retention-prune/approvals'),
    refetchInterval: (q) => (q.state.status === 'error' ? false : 30_000),
  });
  const loading = policy.isPending || changes.isPending || prunes.isPending;
  return (
    <Page
      title="Configuration"
      actions={
        <button type="button" onClick={() => void client.invalidateQueries({ queryKey: CONFIG_KEY })}>
          Refresh
        </button>
      }
    >
      <p className="muted screen-intro">
        Under dual control a job change, a job deletion or a retention prune waits until a second person
        approves it. Every applied configuration is kept as a signed version in a hash chain.
      </p>
      {loading ? <Loading what="Loading the configuration controls" /> : null}
      <ErrorBox error={policy.error} onRetry={() => void policy.refetch()} />
      <ErrorBox error={changes.error} onRetry={() => void changes.refetch()} />
      <ErrorBox error={prunes.error} onRetry={() => void prunes.refetch()} />
      {policy.data ? <PoliciesPanel view={policy.data} who={who} mayChange={isOwner(who)} /> : null}
      <DecisionNotice decision={decision} />
      {changes.data ? (
        <PendingChanges changes={changes.data.changes} who={who} onDecided={setDecision} />
      ) : null}
      {prunes.data && changes.data ? (
        <PrunePanel
          enabled={prunes.data.enabled}
          approvals={prunes.data.approvals}
          changes={changes.data.changes}
          who={who}
          onDecided={setDecision}
        />
      ) : null}
      {changes.data ? <RecentDecisions changes={changes.data.changes} who={who} /> : null}
      <HistoryPanel who={who} />
    </Page>
  );
}
