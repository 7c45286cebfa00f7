/**
 * Proposing and deciding pending configuration changes (docs/config-control.md "Pending changes").
 * The routes check who may call; this module owns what happens at the commit point:
 * - the approver's capability is re-read from the role table right before the write (a role
 *   removed since the request was authenticated refuses the approval);
 * - the decision latch (`claimDecision`) makes every approval or rejection single use;
 * - `ifMatchRev` is checked again by the store inside the write's transaction, and the restore-test
 *   cadence guard runs against the approver's authority;
 * - an applied change appends its configuration version (history.ts);
 * - a retention prune is re-planned (runs/retention.ts with `approved`): only runs the approved
 *   plan named and the fresh plan still deletes are deleted, never the latest good copy.
 */

import { type Caller, type Capability, can, isOwner } from '@coffer/authz';
import type { ObjectStore } from '@coffer/objectstore';
import type { State } from '@coffer/state';
import { type JobConfig, runJobOf } from '../jobs/index.ts';
import { type PendingPrune, PRUNE_PENDING_PREFIX, type PruneResult, pruneJob } from '../runs/retention.ts';
import { roleOfSubject } from '../state/index.ts';
import { applyJobDelete, applyJobUpsert } from './apply.ts';
import { recordConfigVersion, type SignerKeys, type VersionRecord } from './history.ts';
import { POLICY_ACTIONS, type PolicyName, writePolicy } from './policy.ts';
import {
  CHANGE_TTL_MS,
  type ChangePerson,
  type ConfigChange,
  changeKey,
  claimDecision,
  DECIDED_PREFIX,
  effectiveStatus,
  newChangeId,
  policyOf,
  saveChange,
} from './store.ts';

export interface ChangeDeps {
  state: State;
  signer: SignerKeys;
  destinations: ReadonlyMap<string, ObjectStore>;
  log: {
    info(o: object, msg?: string): void;
    warn(o: object, msg?: string): void;
    error(o: object, msg?: string): void;
  };
  /** The source refusal of a job now (unknown connection, an engine path), or null. */
  checkSource(job: JobConfig): { code: string; error: string } | null;
}

/** The capability an approver (or a rejecter other than the proposer) needs, or `owner`. */
export function requiredFor(change: Pick<ConfigChange, 'kind'>): Capability | 'owner' {
  switch (change.kind) {
    case 'job-upsert':
      return 'job.write';
    case 'job-delete':
    case 'retention-prune':
      return 'job.delete';
    case 'policy-disable':
      return 'owner';
  }
}

export function holds(authz: Caller, required: Capability | 'owner'): boolean {
  return required === 'owner' ? isOwner(authz) : can(authz, required);
}

/** Records a pending change; returns it. */
export async function propose(
  state: State,
  input: Pick<ConfigChange, 'kind' | 'target' | 'baseRev' | 'changedFields' | 'config'> & {
    proposedBy: ChangePerson;
    ifMatchRev?: number | null;
    hasIfMatchRev: boolean;
  },
): Promise<ConfigChange> {
  const now = Date.now();
  const change: ConfigChange = {
    id: newChangeId(),
    kind: input.kind,
    target: input.target,
    proposedBy: input.proposedBy,
    proposedAt: new Date(now).toISOString(),
    expiresAt: new Date(now + CHANGE_TTL_MS).toISOString(),
    status: 'pending',
    ...(input.hasIfMatchRev ? { ifMatchRev: input.ifMatchRev ?? null } : {}),
    baseRev: input.baseRev,
    changedFields: [...input.changedFields],
    config: input.config,
    decidedBy: null,
    decidedAt: null,
  };
  await saveChange(state, change);
  return change;
}

export type ApproveResult =
  | { outcome: 'applied'; change: ConfigChange; version: VersionRecord | null; prune?: PruneResult }
  | { outcome: 'not-pending'; status: string }
  | { outcome: 'forbidden'; required: Capability | 'owner' }
  | {
      outcome: 'refused';
      change: ConfigChange;
      reason: string;
      /** For a precondition refusal: the store's precondition; for a source refusal: its body. */
      detail?: unknown;
    };

const ifMatchRevOf = (c: ConfigChange) => (Object.hasOwn(c, 'ifMatchRev') ? c.ifMatchRev : undefined);

async function settle(
  deps: ChangeDeps,
  change: ConfigChange,
  approver: ChangePerson,
  status: 'applied' | 'refused',
  extra: Partial<ConfigChange>,
): Promise<ConfigChange> {
  const decided: ConfigChange = {
    ...change,
    status,
    decidedBy: approver,
    decidedAt: new Date().toISOString(),
    ...extra,
  };
  await saveChange(deps.state, decided);
  if (change.kind === 'retention-prune') await dropPending(deps.state, change);
  return decided;
}

/** Removes a retention prune approval from the pending slot (only if it is still this one). */
async function dropPending(state: State, change: ConfigChange): Promise<void> {
  const key = `${PRUNE_PENDING_PREFIX}${change.target}`;
  const now = await state.settings.get<PendingPrune>(key);
  if (now?.id === change.id) await state.settings.delete(key);
}

/**
 * Approves and carries out `change` as `approver` (a person with a subject, not the proposer:
 * checked by the route). Throws for a store fault.
 */
export async function approve(
  deps: ChangeDeps,
  change: ConfigChange,
  approver: ChangePerson,
): Promise<ApproveResult> {
  const status = effectiveStatus(change);
  if (status !== 'pending') {
    if (status === 'expired' && change.kind !== 'retention-prune')
      await saveChange(deps.state, { ...change, status: 'expired' });
    return { outcome: 'not-pending', status };
  }
  // The commit point: the approver's authority as the role table says now.
  const required = requiredFor(change);
  const authz: Caller = { role: (await roleOfSubject(deps.state, approver.subject!)).role };
  if (!holds(authz, required)) return { outcome: 'forbidden', required };
  if (!(await claimDecision(deps.state, change.id, approver.subject, 'applied')))
    return { outcome: 'not-pending', status: 'decided' };
  try {
    return await carryOut(deps, change, approver, authz);
  } catch (err) {
    // A store fault before the change was settled: release the latch so it can be approved again.
    if (effectiveStatus((await getChangeRecord(deps.state, change.id)) ?? change) === 'pending')
      await deps.state.settings.delete(`${DECIDED_PREFIX}${change.id}`).catch(() => false);
    throw err;
  }
}

async function getChangeRecord(state: State, id: string): Promise<ConfigChange | null> {
  return (await state.settings.get<ConfigChange>(changeKey(id)).catch(() => undefined)) ?? null;
}

/** What each step of an approval needs: the change, its approver, and the history append. */
interface Approval {
  deps: ChangeDeps;
  change: ConfigChange;
  approver: ChangePerson;
  approverRef: Pick<ChangePerson, 'subject' | 'email'>;
  /** Appends the configuration version; a failed append is logged, never fails the approval. */
  version(v: Parameters<typeof recordConfigVersion>[1]): Promise<VersionRecord | null>;
}

async function carryOut(
  deps: ChangeDeps,
  change: ConfigChange,
  approver: ChangePerson,
  authz: Caller,
): Promise<ApproveResult> {
  const a: Approval = {
    deps,
    change,
    approver,
    approverRef: { subject: approver.subject, email: approver.email },
    version: (v) =>
      recordConfigVersion({ state: deps.state, signer: deps.signer }, v).catch((err) => {
        deps.log.error(
          { code: (err as { code?: string }).code ?? 'ERR_UNKNOWN' },
          'config history append failed',
        );
        return null;
      }),
  };
  switch (change.kind) {
    case 'job-upsert':
      return carryOutUpsert(a, authz);
    case 'job-delete':
      return carryOutDelete(a);
    case 'policy-disable':
      return carryOutPolicyDisable(a);
    case 'retention-prune':
      return carryOutRetentionPrune(a);
  }
}

async function carryOutUpsert(a: Approval, authz: Caller): Promise<ApproveResult> {
  const { deps, change, approver } = a;
  const job = change.config as JobConfig;
  const source = deps.checkSource(job);
  if (source) {
    const c = await settle(deps, change, approver, 'refused', { reason: source.code });
    return { outcome: 'refused', change: c, reason: source.code, detail: source };
  }
  const r = await applyJobUpsert(deps.state, authz, job, ifMatchRevOf(change));
  if (!r.ok) {
    const reason = r.status === 403 ? 'capability' : r.precondition.reason;
    const c = await settle(deps, change, approver, 'refused', { reason });
    return {
      outcome: 'refused',
      change: c,
      reason,
      detail: r.status === 403 ? { required: r.required } : r.precondition,
    };
  }
  const rec =
    r.result.outcome === 'unchanged'
      ? null
      : await a.version({
          kind: 'job-upsert',
          target: job.id,
          actor: change.proposedBy,
          approver: a.approverRef,
          changeId: change.id,
          configRev: r.result.job.configRev,
          changedFields: r.result.changedFields,
          config: r.result.job.config,
        });
  const c = await settle(deps, change, approver, 'applied', {
    configRev: r.result.job.configRev,
    changedFields: r.result.changedFields,
    version: rec?.id ?? null,
  });
  return { outcome: 'applied', change: c, version: rec };
}

async function carryOutDelete(a: Approval): Promise<ApproveResult> {
  const { deps, change, approver } = a;
  const r = await applyJobDelete(deps.state, change.target, ifMatchRevOf(change));
  if (!r.ok) {
    const c = await settle(deps, change, approver, 'refused', { reason: r.precondition.reason });
    return { outcome: 'refused', change: c, reason: r.precondition.reason, detail: r.precondition };
  }
  const rec = await a.version({
    kind: 'job-delete',
    target: change.target,
    actor: change.proposedBy,
    approver: a.approverRef,
    changeId: change.id,
    configRev: r.result.deletedRev,
    changedFields: [],
    config: null,
  });
  const c = await settle(deps, change, approver, 'applied', {
    configRev: r.result.deletedRev,
    version: rec?.id ?? null,
  });
  return { outcome: 'applied', change: c, version: rec };
}

async function carryOutPolicyDisable(a: Approval): Promise<ApproveResult> {
  const { deps, change, approver } = a;
  const policy = policyOf(change);
  if (policy === null) {
    const c = await settle(deps, change, approver, 'refused', { reason: 'unreadable' });
    return { outcome: 'refused', change: c, reason: 'unreadable' };
  }
  const value = await writePolicy(deps.state, policy, false, `approved:${change.id}`);
  const rec = await a.version({
    kind: POLICY_ACTIONS[policy],
    target: policy,
    actor: change.proposedBy,
    approver: a.approverRef,
    changeId: change.id,
    configRev: null,
    changedFields: ['enabled'],
    config: { policy, enabled: value.enabled },
  });
  const c = await settle(deps, change, approver, 'applied', { version: rec?.id ?? null });
  return { outcome: 'applied', change: c, version: rec };
}

async function carryOutRetentionPrune(a: Approval): Promise<ApproveResult> {
  const { deps, change, approver } = a;
  const rec = await deps.state.jobs.get(change.target);
  if (rec === null || rec.config.enabled === false) {
    const reason = rec === null ? 'job-gone' : 'job-paused';
    const c = await settle(deps, change, approver, 'refused', { reason });
    return { outcome: 'refused', change: c, reason };
  }
  const planned = (change.config as { destinations?: Record<string, string[]> }).destinations ?? {};
  const prune = await pruneJob(
    {
      state: deps.state,
      destinations: deps.destinations,
      log: deps.log,
      now: () => new Date(),
      signerPublicKey: deps.signer.publicKey,
      approved: planned,
    },
    runJobOf(rec),
  );
  const c = await settle(deps, change, approver, 'applied', {
    config: { destinations: planned, pruned: prune.pruned },
  });
  return { outcome: 'applied', change: c, version: null, prune };
}

/** Rejects `change` as `by`; false when it was not pending (or another decision won). */
export async function reject(
  deps: ChangeDeps,
  change: ConfigChange,
  by: ChangePerson,
): Promise<ConfigChange | null> {
  if (effectiveStatus(change) !== 'pending') return null;
  if (!(await claimDecision(deps.state, change.id, by.subject, 'rejected'))) return null;
  const decided: ConfigChange = {
    ...change,
    status: 'rejected',
    decidedBy: by,
    decidedAt: new Date().toISOString(),
  };
  await saveChange(deps.state, decided);
  if (change.kind === 'retention-prune') await dropPending(deps.state, change);
  return decided;
}

/** The policies a `policy-disable` change can lower (for the audit action of the decision). */
export function policyAction(change: ConfigChange): (typeof POLICY_ACTIONS)[PolicyName] | null {
  const p = policyOf(change);
  return p === null ? null : POLICY_ACTIONS[p];
}
