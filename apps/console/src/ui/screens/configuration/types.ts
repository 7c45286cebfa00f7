/**
 * What the Configuration screen reads and writes (docs/config-control.md): the two approval
 * policies, pending and decided configuration changes, retention prunes held for a second person,
 * and the signed, hash-chained configuration history. Also the plain words for a refused approval
 * (maker is checker, the job moved, expired, already decided) and who may approve or reject what.
 */
import { ApiError } from '../../api/errors.ts';
import { can, isOwner, type Whoami } from '../../auth/session.tsx';

export const CONFIG_KEY = ['configuration'] as const;
export const POLICY_KEY = ['configuration', 'policy'] as const;
export const CHANGES_KEY = ['configuration', 'changes'] as const;
export const PRUNES_KEY = ['configuration', 'prunes'] as const;
export const HISTORY_KEY = ['configuration', 'history'] as const;
export const versionKey = (id: number) => ['configuration', 'version', id] as const;

export interface Person {
  subject: string | null;
  email: string | null;
  method?: string;
}

export type ChangeKind = 'job-upsert' | 'job-delete' | 'policy-disable' | 'retention-prune';
export type ChangeStatus = 'pending' | 'applied' | 'rejected' | 'refused' | 'expired';

/** One entry of `GET /admin/config/changes`. */
export interface ConfigChange {
  id: string;
  kind: ChangeKind;
  target: string;
  status: ChangeStatus;
  proposedBy: Person;
  proposedAt: string;
  expiresAt: string;
  ifMatchRev?: number | null;
  baseRev: number | null;
  changedFields: string[];
  config: unknown;
  decidedBy: Person | null;
  decidedAt: string | null;
  reason: string | null;
  configRev: number | null;
  version: number | null;
}

export interface PolicyState {
  enabled: boolean;
  setBy?: string | null;
  setAt?: string | null;
  by?: string | null;
  at?: string | null;
}

/** `GET /admin/config/approval-policy`. */
export interface PolicyView {
  configApproval: PolicyState;
  retentionPruneApproval: PolicyState;
  maxBatch: number;
  pending: ConfigChange[];
}

export type PolicyName = 'config-approval' | 'retention-prune-approval';
export const POLICY_PATH: Record<PolicyName, string> = {
  'config-approval': '/admin/config/approval-policy',
  'retention-prune-approval': '/admin/retention-prune/approval-policy',
};
export const POLICY_TITLE: Record<PolicyName, string> = {
  'config-approval': 'Configuration approval',
  'retention-prune-approval': 'Retention-prune approval',
};

/** `POST` of a policy: 200 set (or unchanged), 202 a pending lowering. */
export type PolicyReply =
  | { ok: true; enabled: boolean; changed: boolean; pending?: undefined }
  | {
      ok: true;
      pending: true;
      changeId: string;
      status: 'pending';
      kind: 'policy-disable';
      enabled: boolean;
      requested: boolean;
      expiresAt: string;
    };

/** One entry of `GET /admin/retention-prune/approvals`. */
export interface PruneApproval {
  id: string;
  job: string;
  status: ChangeStatus;
  plannedAt: string;
  expiresAt: string;
  destinations: Record<string, string[]>;
  runs: number;
}

export interface PruneView {
  enabled: boolean;
  approvals: PruneApproval[];
}

export interface ApproveReply {
  ok: true;
  id: string;
  status: 'applied';
  kind: ChangeKind;
  target: string;
  configRev: number | null;
  version: number | null;
  pruned?: string[];
}

/** One record of the configuration history. */
export interface VersionRecord {
  v?: number;
  id: number;
  at?: string;
  kind?: string;
  target?: string;
  actor?: Person;
  approver?: Person | null;
  changeId?: string | null;
  configRev?: number | null;
  configHash?: string;
  changedFields?: string[];
  prevHash?: string;
  hash?: string;
}

export interface HistoryView {
  head: { id: number; hash: string } | null;
  chain: { ok: boolean; checked: number; brokenAt?: number; reason?: string };
  versions: (VersionRecord & { verified: boolean; fault?: string })[];
  nextBefore: number | null;
  signer: { fingerprint: string };
}

export interface VersionView {
  record: VersionRecord | null;
  config: unknown;
  signature: string | null;
  signer: string | null;
  verification: { ok: boolean; signature: boolean; fault?: string; context: string };
}

export const KIND_TEXT: Record<string, string> = {
  'job-upsert': 'Job change',
  'job-delete': 'Job deletion',
  'policy-disable': 'Turn a policy off',
  'retention-prune': 'Retention prune',
  'config-approval-policy': 'Configuration-approval policy',
  'retention-prune-approval-policy': 'Retention-prune approval policy',
  'control-plane-restore': 'Control-plane restore',
  'control-plane-import': 'Control-plane import',
};
export const kindText = (k: string | undefined) => (k ? (KIND_TEXT[k] ?? k) : '–');

/** What breaks a chain, in words (docs/config-control.md "History"). */
export const CHAIN_REASON: Record<string, string> = {
  missing: 'a version is missing (removed)',
  unreadable: 'a version cannot be read',
  'hash-mismatch': "a version's fields were edited after it was written",
  'signature-invalid': "a version's signature does not verify against this engine's signer",
  'prev-mismatch': 'a link between two versions is broken',
  'config-mismatch': 'the configuration kept with a version was swapped',
  'head-mismatch': 'the chain head does not match the newest version',
};

/** The capability an approval of `c` needs (`'owner'` for a policy lowering). */
export function requiredFor(c: Pick<ConfigChange, 'kind'>): string {
  if (c.kind === 'job-upsert') return 'job.write';
  if (c.kind === 'policy-disable') return 'owner';
  return 'job.delete';
}

export function holds(who: Whoami, required: string): boolean {
  return required === 'owner' ? isOwner(who) && who.subject !== null : can(who, required);
}

export const isOwn = (who: Whoami, c: Pick<ConfigChange, 'proposedBy'>) =>
  who.subject !== null && c.proposedBy.subject === who.subject;

/** May `who` approve `c` (another person with a subject holding the change's capability)? */
export function mayApprove(who: Whoami, c: ConfigChange): boolean {
  return who.subject !== null && !isOwn(who, c) && holds(who, requiredFor(c));
}

/** May `who` reject `c` (the proposer withdrawing, or a holder of its capability)? */
export function mayReject(who: Whoami, c: ConfigChange): boolean {
  const required = requiredFor(c);
  // A rejection only drops: the admin token (an owner without a subject) may reject too.
  return isOwn(who, c) || (required === 'owner' ? isOwner(who) : can(who, required));
}

export function personText(p: Person | null | undefined, who?: Whoami): string {
  if (!p) return '–';
  if (who && who.subject !== null && p.subject === who.subject) return `you (${p.email ?? p.subject})`;
  if (p.method === 'engine') return 'the engine';
  if (p.method === 'admin-token' || (p.subject === null && p.email === null)) return 'the admin token';
  return p.email ?? p.subject ?? '–';
}

/** "3 h ago", "in 6 days". */
export function relative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '–';
  const ms = Date.parse(iso) - now;
  if (!Number.isFinite(ms)) return iso;
  const abs = Math.abs(ms);
  const unit =
    abs >= 86_400_000
      ? [Math.round(abs / 86_400_000), 'day']
      : abs >= 3_600_000
        ? [Math.round(abs / 3_600_000), 'hour']
        : abs >= 60_000
          ? [Math.round(abs / 60_000), 'minute']
          : null;
  if (unit === null) return ms < 0 ? 'just now' : 'in under a minute';
  const text = `${unit[0]} ${unit[1]}${unit[0] === 1 ? '' : 's'}`;
  return ms < 0 ? `${text} ago` : `in ${text}`;
}

/** A refused approval or rejection in words a person can act on. */
export function decisionError(err: unknown): string | null {
  if (!(err instanceof ApiError)) return null;
  const body = (typeof err.body === 'object' && err.body !== null ? err.body : {}) as {
    error?: string;
    status?: string;
    reason?: string;
    refusal?: string;
    have?: string;
    atCommit?: boolean;
    precondition?: {
      reason: string;
      yourRev?: number | null;
      currentRev: number | null;
      changedFields: string[];
    };
  };
  if (err.status === 403) {
    if (/^maker is not checker/.test(body.error ?? ''))
      return 'You proposed this change, so you cannot approve it: another person must (maker is not checker).';
    if (body.have === 'admin-token')
      return 'The admin token cannot approve a change: a signed-in person approves.';
    if (body.atCommit)
      return `Your role no longer holds ${err.required ?? 'the capability'} this change needs; nothing was applied.`;
    return null;
  }
  if (err.status === 404)
    return 'This change no longer exists: a retention plan may have been replaced by a newer one. Reload the list.';
  if (err.status === 409) {
    if (body.refusal === 'precondition-failed' && body.precondition) {
      const p = body.precondition;
      const what =
        p.reason === 'base-moved'
          ? `The job moved since the change was proposed (revision ${p.yourRev ?? '?'} is now ${p.currentRev ?? '?'}${
              p.changedFields.length ? `; changed: ${p.changedFields.join(', ')}` : ''
            })`
          : p.reason === 'deleted-under-you' || p.reason === 'already-deleted'
            ? 'The job was deleted since the change was proposed'
            : `The job's revision no longer matches (${p.reason})`;
      return `${what}. The change is refused and nothing was applied; propose it again from the job.`;
    }
    if (body.status === 'expired')
      return 'This change expired (changes wait at most 7 days) and can no longer be approved.';
    if (body.status === 'refused' && body.reason === 'job-paused')
      return 'The job is paused, so the prune is refused. Resume the job first.';
    if (body.status === 'refused' && body.reason === 'job-gone')
      return 'The job no longer exists, so the change is refused.';
    if (body.status === 'refused')
      return `The change cannot be applied now (${body.reason ?? 'refused'}); it is refused and nothing was applied.`;
    if (body.status) return `This change was already decided: it is ${body.status}.`;
  }
  return null;
}
