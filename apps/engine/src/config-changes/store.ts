/**
 * Pending configuration changes (specification "Pending changes"; docs/config-control.md
 * "Pending changes"), in the settings store:
 * - `config.change.<id>`: one proposed job upsert, job delete or policy lowering, with its
 *   proposer, the `ifMatchRev` exactly as sent (by presence), the base revision it was proposed
 *   against, the changed field names, and its decision once decided;
 * - `config.change-decided.<id>`: the single-use latch, claimed with `setIfAbsent` by the one
 *   approval or rejection that decides the change (a second decision, on any replica, loses);
 * - retention prune approvals live in `retention.prune-pending.<job>` (runs/retention.ts writes
 *   them; `listPrunes` reads them as changes of kind `retention-prune`).
 * A pending change expires CHANGE_TTL_MS after it was proposed (then it can only be listed).
 */
import { randomBytes } from 'node:crypto';
import type { State } from '@coffer/state';
import { type PendingPrune, PRUNE_PENDING_PREFIX } from '../runs/retention.ts';
import type { PolicyName } from './policy.ts';

export const CHANGE_PREFIX = 'config.change.';
export const DECIDED_PREFIX = 'config.change-decided.';
/** Seven days. */
export const CHANGE_TTL_MS = 7 * 86_400_000;

export type ChangeKind = 'job-upsert' | 'job-delete' | 'policy-disable' | 'retention-prune';
export type ChangeStatus = 'pending' | 'applied' | 'rejected' | 'refused' | 'expired';

export interface ChangePerson {
  subject: string | null;
  email: string | null;
  method: string;
}

export interface ConfigChange {
  id: string;
  kind: ChangeKind;
  /** The job id, or the policy name for `policy-disable`. */
  target: string;
  proposedBy: ChangePerson;
  proposedAt: string;
  expiresAt: string;
  status: ChangeStatus;
  /** `ifMatchRev` as sent: absent key = not sent. */
  ifMatchRev?: number | null;
  /** The job's configRev when proposed (null: not live). */
  baseRev: number | null;
  /** Field names the change would change against the base (never values). */
  changedFields: string[];
  /** job-upsert: the normalised job; policy-disable: `{ policy, enabled: false }`; else null. */
  config: unknown;
  decidedBy?: ChangePerson | null;
  decidedAt?: string | null;
  /** Why an approval was refused at the commit point (`base-moved`, `capability`, ...). */
  reason?: string | null;
  /** The configRev (or deletedRev) the applied change produced. */
  configRev?: number | null;
  /** The config history version the applied change appended. */
  version?: number | null;
}

export const changeKey = (id: string) => `${CHANGE_PREFIX}${id}`;

export function newChangeId(): string {
  return `cc_${randomBytes(12).toString('base64url')}`;
}

export async function saveChange(state: State, change: ConfigChange): Promise<void> {
  await state.settings.set(changeKey(change.id), change);
}

/** The status a reader sees: a pending change past its expiry is `expired`. */
export function effectiveStatus(
  c: { status: ChangeStatus; expiresAt: string },
  now = Date.now(),
): ChangeStatus {
  return c.status === 'pending' && Date.parse(c.expiresAt) <= now ? 'expired' : c.status;
}

export async function getChange(state: State, id: string): Promise<ConfigChange | null> {
  if (id.startsWith('rp_')) return (await listPrunes(state)).find((p) => p.id === id) ?? null;
  const v = await state.settings.get<ConfigChange>(changeKey(id));
  return v && typeof v === 'object' && v.id === id ? v : null;
}

/** The change as a retention prune approval (pending until decided). */
function pruneChange(p: PendingPrune): ConfigChange {
  return {
    id: p.id,
    kind: 'retention-prune',
    target: p.job,
    proposedBy: { subject: null, email: null, method: 'engine' },
    proposedAt: p.plannedAt,
    expiresAt: p.expiresAt,
    status: 'pending',
    baseRev: null,
    changedFields: [],
    config: { destinations: p.destinations },
  };
}

/** The pending retention prune approvals, as changes (one per job). */
export async function listPrunes(state: State): Promise<ConfigChange[]> {
  const out: ConfigChange[] = [];
  for (const { value } of await state.settings.list(PRUNE_PENDING_PREFIX)) {
    const p = value as PendingPrune;
    if (p && typeof p === 'object' && typeof p.id === 'string' && p.kind === 'retention-prune')
      out.push(pruneChange(p));
  }
  return out;
}

/** Every config change (decided ones too) and pending prune approvals, newest first. */
export async function listChanges(state: State): Promise<ConfigChange[]> {
  const rows = (await state.settings.list(CHANGE_PREFIX))
    .map((r) => r.value as ConfigChange)
    .filter((c) => c && typeof c === 'object' && typeof c.id === 'string');
  return [...rows, ...(await listPrunes(state))].sort((a, b) =>
    a.proposedAt < b.proposedAt ? 1 : a.proposedAt > b.proposedAt ? -1 : 0,
  );
}

/** Claims the single decision of `id`; false when another decision got there first. */
export function claimDecision(state: State, id: string, by: string | null, status: ChangeStatus) {
  return state.settings.setIfAbsent(`${DECIDED_PREFIX}${id}`, {
    by,
    status,
    at: new Date().toISOString(),
  });
}

/** The policy a `policy-disable` change lowers. */
export function policyOf(change: ConfigChange): PolicyName | null {
  const p = (change.config as { policy?: unknown } | null)?.policy;
  return p === 'config-approval' || p === 'retention-prune-approval' ? p : null;
}
