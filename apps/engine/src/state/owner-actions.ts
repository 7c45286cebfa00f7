/**
 * Owner-action dual control (docs/identity.md "Owner-action dual control"): the gate's durable
 * switch and the queue of pending owner actions (approvals of kind `owner-action`). While the gate
 * is armed, the named owner actions are queued instead of carried out, and a second owner
 * approves or rejects each one (maker is not checker, single use, 24 hours). The update-approval
 * policy (updates/approval.ts) queues its owner actions in the same queue, armed or not.
 */

import { randomBytes } from 'node:crypto';
import type { ApprovalRecord, State } from '@coffer/state';

export const OWNER_ACTION_GATE = 'identity.owner-action-gate';
/**
 * The owner actions: the first four are what the gate holds back; `update-apply` (a live apply or
 * ramp the update-approval policy holds for a second owner) and `update-policy` (lowering that
 * policy from `all` to `migrations`) are queued whether or not the gate is armed
 * (updates/approval.ts).
 */
export const OWNER_ACTIONS = [
  'credential-mint',
  'admin-token-retire',
  'owner-grant',
  'gate-disarm',
  'update-apply',
  'update-policy',
] as const;
export type OwnerAction = (typeof OWNER_ACTIONS)[number];
export const OWNER_ACTION_TTL_MS = 24 * 3600 * 1000;

/** Whether the gate is armed. Throws when the switch cannot be read (callers fail closed: 502). */
export async function ownerGateArmed(state: State): Promise<boolean> {
  const v = await state.settings.get<{ armed?: unknown }>(OWNER_ACTION_GATE);
  return v?.armed === true;
}

export async function setOwnerGate(state: State, armed: boolean, by: string | null): Promise<void> {
  await state.settings.set(OWNER_ACTION_GATE, { armed, by, at: new Date().toISOString() });
}

/** Queues `action` (params hold no secret) by `maker`; returns the pending record. */
export function queueOwnerAction(
  state: State,
  action: OwnerAction,
  params: Record<string, unknown>,
  maker: { subject: string | null; email: string | null },
): Promise<ApprovalRecord> {
  return state.approvals.create({
    id: `oa_${randomBytes(12).toString('base64url')}`,
    kind: 'owner-action',
    requestedBy: maker.subject ?? 'admin-token',
    requestedByEmail: maker.email,
    expiresAt: new Date(Date.now() + OWNER_ACTION_TTL_MS).toISOString(),
    detail: { action, params },
  });
}
