/** Shapes of the posture reads (docs/posture.md) the Posture screen shows. */

export type PreflightStatus = 'verified' | 'configured' | 'unconfigured' | 'failed';

export interface PreflightItem {
  id: string;
  title: string;
  status: PreflightStatus;
  evidence: Record<string, unknown>;
  remediation: string | null;
}

export interface PreflightReport {
  ok: boolean;
  checkedAt: string;
  durationMs: number;
  summary: Record<PreflightStatus, number> & { total: number };
  items: PreflightItem[];
}

export interface PostureStatus {
  engineVersion: string;
  ready: boolean;
  keysReady: boolean;
  missing: string[];
  keys: { signer: boolean; operational: boolean; breakGlass: boolean; support: boolean };
  adminTokenPresent: boolean;
  adminTokenDisabled: boolean;
  breakGlassTokenRetired: boolean;
  tokenPathClosed: boolean;
  perimeterAccessConfigured: boolean;
  consoleOriginConfigured: boolean;
  scimEnabled: boolean;
  tlsTerminatedByEngine: boolean;
  database: string | null;
  restoreRootsConfigured: boolean;
  destinations: string[] | null;
  setupAcknowledged: boolean | null;
  setupAcknowledgementCurrent: boolean | null;
  smtpConfigured: boolean;
  smtpCredentialsPresent: boolean;
  updateChannelConfigured: boolean;
  identityProviders: { connections: number; enabled: number; oidc: number; saml: number } | null;
  canary: { intervalSeconds: number; verdict: string | null; lastFlightAt: string | null } | null;
  scheduler: { tickSeconds: number; lastTick: string | null } | null;
  counts: { jobs: number | null; destinations: number | null; restoreRoots: number | null } | null;
}

export type LicenceStatus = 'valid' | 'absent' | 'not-yet-valid' | 'lapsed' | 'invalid';

export interface Licence {
  tier: string;
  status: LicenceStatus;
  reason: string | null;
  licensee?: string | null;
  licensedTier?: string | null;
  seats?: number | null;
  licenceId?: string | null;
  issuedAt?: string | null;
  notBefore?: string | null;
  expiresAt?: string | null;
  checkedAt?: string;
}

export interface SetupAcknowledgementState {
  acknowledged: boolean;
  acknowledgement: { at: string; current: boolean } | null;
  keysReady: boolean;
  missing: string[];
}

export const POSTURE_KEY = ['posture'] as const;
export const PREFLIGHT_KEY = [...POSTURE_KEY, 'preflight'] as const;
export const POSTURE_STATUS_KEY = [...POSTURE_KEY, 'status'] as const;
export const LICENCE_KEY = [...POSTURE_KEY, 'licence'] as const;
export const SETUP_STATE_KEY = ['setup-state'] as const;

/** What each missing key variable is, in words (the 409 `missing` of the acknowledgement). */
const KEY_WORDS: Record<string, string> = {
  ENGINE_BREAK_GLASS_PUBLIC_KEY:
    'the break-glass public key (set it on the Set-up screen or with ENGINE_BREAK_GLASS_PUBLIC_KEY)',
  ENGINE_SIGNER_KEY: "the engine's signer key",
  ENGINE_OPERATIONAL_KEY: "the engine's operational key",
};

export function missingInWords(missing: readonly string[]): string {
  if (missing.length === 0) return 'a key the engine needs';
  return missing.map((m) => KEY_WORDS[m] ?? `the key named by ${m}`).join('; ');
}
