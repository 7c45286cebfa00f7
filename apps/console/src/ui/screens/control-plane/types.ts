/** Bodies of the control-plane routes (docs/control-plane.md). */

export const CONTROL_PLANE_STATUS_KEY = ['control-plane', 'status'] as const;

export interface ControlPlaneStatus {
  recoveryNeeded: boolean;
  reasons: string[];
  empty: boolean;
  counts: { jobs: number; members: number; channels: number };
  signerFingerprint: string;
  breakGlassKey: boolean;
  staged: {
    stagedAt: string;
    sealed: boolean;
    signerFingerprint: string;
    jobs: number;
    members: number;
  } | null;
}

export interface RestoreReply {
  ok: true;
  sealed: boolean;
  signerFingerprint: string;
  exportedAt: string;
  applied: {
    jobs: Array<{ id: string; outcome: string; configRev: number; enabled: boolean }>;
    channels: string[];
    rules: string[];
    policies: string[];
    pins: number;
    runs: number;
  };
  historyFailures: number;
  staged: { resume: { jobs: number; runs: number }; authority: { members: number; customRoles: number } };
}

export interface ApplyStagedReply {
  ok: true;
  applied: {
    resume: { jobs: number; runs: number };
    authority: { members: number; customRoles: number; policies?: unknown };
  };
}

export interface ImportReply {
  ok: true;
  sealed: boolean;
  signerFingerprint: string;
  sameSigner: boolean;
  /** Configuration dual control was on: every imported job arrived disabled. */
  heldByApproval?: boolean;
  historyFailures: number;
  items: Array<{ id: string; outcome: 'imported' | 'exists'; configRev: number; enabled: boolean }>;
  channels: { applied: string[]; skipped: string[] };
  rules: { applied: string[]; skipped: string[] };
  ignored: string[];
}

/** What a chosen export file turned out to be. */
export type ExportFile =
  | { kind: 'signed'; body: Record<string, unknown>; name: string }
  | { kind: 'sealed'; body: Record<string, unknown>; name: string };

export const SIGNED_KIND = 'coffer-control-plane-signed-export';
export const SEALED_KIND = 'coffer-control-plane-sealed-export';

/** The status reasons in words (docs/control-plane.md "Status"). */
export const REASONS: Record<string, string> = {
  'restore-staged':
    'A restore was applied; its run history and who may do what wait to be applied (apply the staged slices).',
  'keys-predate-state':
    "This engine's keys are older than its state store: the state of an earlier installation is gone. Restore an export (or configure the engine if the keys were made ahead on purpose).",
  'archives-in-destination':
    "A destination holds archives signed by this engine's key, but the engine knows no jobs: restore an export.",
};
