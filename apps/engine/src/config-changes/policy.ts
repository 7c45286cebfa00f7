/**
 * The two dual-control policies (docs/config-control.md "Policies"), each one settings key whose
 * value is `{ enabled, by, at }`:
 * - `config.approval.enabled`: job upserts and deletes are held as pending changes for a second
 *   person (store.ts) and the bulk cap drops to MAX_BATCH_UNDER_APPROVAL;
 * - `retention.prune-approval.enabled`: the retention pass holds what it would delete as a pending
 *   prune approval per job (runs/retention.ts) instead of deleting it.
 *
 * Security-relevant behaviour: absent means off; a value that is present but not
 * `{ enabled: false }` counts as ON (fail closed: an unreadable policy never lets a write through
 * unreviewed). A read failure of the store is thrown to the caller, which answers 502 or holds.
 */
import type { State } from '@coffer/state';
import { RETENTION_PRUNE_APPROVAL_POLICY } from '../runs/retention.ts';

export const CONFIG_APPROVAL_POLICY = 'config.approval.enabled';
export { RETENTION_PRUNE_APPROVAL_POLICY };

/** The bulk upsert cap while config approval is on (specification "Limits"). */
export const MAX_BATCH_UNDER_APPROVAL = 10;

export type PolicyName = 'config-approval' | 'retention-prune-approval';

export const POLICY_KEYS: Record<PolicyName, string> = {
  'config-approval': CONFIG_APPROVAL_POLICY,
  'retention-prune-approval': RETENTION_PRUNE_APPROVAL_POLICY,
};

/** The audit action of each policy's changes (docs/audit.md). */
export const POLICY_ACTIONS = {
  'config-approval': 'config-approval-policy',
  'retention-prune-approval': 'retention-prune-approval-policy',
} as const;

export interface PolicyState {
  enabled: boolean;
  /** Who set it last (a subject, `admin-token`, or `approved:<change id>`); null when never set. */
  setBy: string | null;
  setAt: string | null;
}

/** The policy's value: absent is off, anything but `{ enabled: false }` is on. Throws on a store fault. */
export async function readPolicy(state: State, name: PolicyName): Promise<PolicyState> {
  const v = await state.settings.get<{ enabled?: unknown; by?: unknown; at?: unknown }>(POLICY_KEYS[name]);
  if (v === undefined || v === null) return { enabled: false, setBy: null, setAt: null };
  const enabled = typeof v === 'object' ? v.enabled !== false : true;
  return {
    enabled,
    setBy: typeof v === 'object' && typeof v.by === 'string' ? v.by : null,
    setAt: typeof v === 'object' && typeof v.at === 'string' ? v.at : null,
  };
}

export async function writePolicy(
  state: State,
  name: PolicyName,
  enabled: boolean,
  by: string,
): Promise<{ enabled: boolean; by: string; at: string }> {
  const value = { enabled, by, at: new Date().toISOString() };
  await state.settings.set(POLICY_KEYS[name], value);
  return value;
}

/** The bulk cap now: 10 while config approval is on, else the jobs room's MAX_BATCH. */
export function bulkCap(approvalOn: boolean, maxBatch: number): number {
  return approvalOn ? Math.min(MAX_BATCH_UNDER_APPROVAL, maxBatch) : maxBatch;
}
