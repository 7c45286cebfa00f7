/**
 * The control-plane export document (docs/control-plane.md "The export document", v1): what the
 * engine keeps beyond its keys, archives and audit chain, gathered from the state store into three
 * slices:
 *
 * - `configuration`: jobs with their `configRev`, the connections file's names (ids, types,
 *   endpoints, environment-variable NAMES; never a value), notification channels and rules with
 *   their write-only fields exactly as stored (sealed under the operational key, `cnb1.`), the
 *   policy settings that exist, and retention pins;
 * - `resume`: per job its history ring of finished runs (id, seq, prevRunId, status, times, ...),
 *   its ring counters and scheduler stand-down and staleness latches, plus the run-log counter;
 * - `authority`: role assignments and custom roles.
 *
 * Runs in flight are left out (a restored engine cannot continue another process's attempt; their
 * checkpoints are sealed state that never leaves the engine).
 */
import type { CustomRole, JobRecord, RoleAssignment, RunRecord, State } from '@coffer/state';
import type { ConnectionsConfig } from '../connections/config.ts';
import { APPROVAL_ENABLED_KEY, APPROVAL_MIN_DELAY_KEY } from '../restores/plan-options.ts';
import { STALE_PREFIX, STAND_DOWN_PREFIX } from '../runs/index.ts';
import { PIN_PREFIX } from '../runs/pins.ts';
import { OWNER_ACTION_GATE } from '../state/owner-actions.ts';
import { ENGINE_VERSION } from '../version.ts';

export const EXPORT_KIND = 'coffer-control-plane-export';
export const EXPORT_VERSION = 1;

/** The update-approval policy setting (updates/approval.ts; read here by name only). */
export const UPDATE_APPROVAL_POLICY = 'update.approval-policy';
/** Settings introduced by configuration dual control (exported whichever exist). */
export const CONFIG_APPROVAL_KEY = 'config.approval.enabled';
export const PRUNE_APPROVAL_KEY = 'retention.prune-approval.enabled';

/**
 * The policy settings an export carries, in order. The owner-action gate is applied with the
 * authority slice (it governs owners, who exist only once that slice is restored).
 */
export const POLICY_KEYS = [
  APPROVAL_ENABLED_KEY,
  APPROVAL_MIN_DELAY_KEY,
  UPDATE_APPROVAL_POLICY,
  CONFIG_APPROVAL_KEY,
  PRUNE_APPROVAL_KEY,
  OWNER_ACTION_GATE,
] as const;
export const AUTHORITY_POLICY_KEYS: readonly string[] = [OWNER_ACTION_GATE];

export interface ExportedJob {
  id: string;
  configRev: number;
  config: Record<string, unknown>;
}

export interface ExportedRing {
  id: string;
  recordedTotal: number;
  rolledOver: number;
  /** Finished runs, oldest first. */
  runs: RunRecord[];
  standDown: Record<string, unknown> | null;
  stale: Record<string, unknown> | null;
}

export interface ConfigurationSlice {
  jobs: ExportedJob[];
  connections: Array<Record<string, unknown>>;
  notify: {
    channels: Array<Record<string, unknown>>;
    rules: Array<{ id: string; scope: string; rule: Record<string, unknown> }>;
  };
  policies: Record<string, unknown>;
  retention: { pins: Array<{ key: string; value: unknown }> };
}

export interface ResumeSlice {
  runsRecordedTotal: number;
  jobs: ExportedRing[];
}

export interface AuthoritySlice {
  members: Array<Omit<RoleAssignment, never>>;
  customRoles: Array<Omit<CustomRole, 'updatedAt'>>;
}

export interface ControlPlaneExport {
  v: 1;
  kind: typeof EXPORT_KIND;
  exportedAt: string;
  engineVersion: string;
  signerFingerprint: string;
  slices: { configuration: ConfigurationSlice; resume: ResumeSlice; authority: AuthoritySlice };
}

/** Plain JSON (no undefined, no class instances) so the canonical form is exactly what is parsed back. */
function plain<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function connectionsOf(connections: ConnectionsConfig): Array<Record<string, unknown>> {
  return [...connections.connections.values()]
    .map((c) => plain({ ...c }) as Record<string, unknown>)
    .sort((a, b) => String(a.id).localeCompare(String(b.id)));
}

async function policiesOf(state: State): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of POLICY_KEYS) {
    const v = await state.settings.get(key);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

const IN_FLIGHT = new Set(['running', 'parked']);

async function ringOf(state: State, job: JobRecord): Promise<ExportedRing> {
  const runs = (await state.runs.listForJob(job.id))
    .filter((r) => !IN_FLIGHT.has(r.status))
    .sort((a, b) => a.seq - b.seq);
  const counters = await state.runs.counters(job.id);
  const standDown = await state.settings.get<Record<string, unknown>>(`${STAND_DOWN_PREFIX}${job.id}`);
  const stale = await state.settings.get<Record<string, unknown>>(`${STALE_PREFIX}${job.id}`);
  return {
    id: job.id,
    recordedTotal: counters.runsRecordedTotal,
    rolledOver: counters.runsRolledOverCount,
    runs,
    standDown: standDown ?? null,
    stale: stale ?? null,
  };
}

/** Gathers the export document from the state store (nothing is written). */
export async function buildExport(deps: {
  state: State;
  connections: ConnectionsConfig;
  signerFingerprint: string;
  now?: Date;
}): Promise<ControlPlaneExport> {
  const { state } = deps;
  const jobs = await state.jobs.list();
  const channels = await state.notifications.listChannels();
  const rules = await state.notifications.listRules();
  const pins = await state.settings.list(PIN_PREFIX);
  const rings: ExportedRing[] = [];
  for (const job of jobs) rings.push(await ringOf(state, job));
  const members = await state.roles.list();
  const customRoles = await state.roles.listCustomRoles();
  const global = await state.runs.counters();
  return plain({
    v: 1,
    kind: EXPORT_KIND,
    exportedAt: (deps.now ?? new Date()).toISOString(),
    engineVersion: ENGINE_VERSION,
    signerFingerprint: deps.signerFingerprint,
    slices: {
      configuration: {
        jobs: jobs.map((j) => ({ id: j.id, configRev: j.configRev, config: j.config })),
        connections: connectionsOf(deps.connections),
        notify: {
          // The stored channel (transport fields with sealed secrets) flattened as @coffer/notify keeps it.
          channels: channels.map((c) => ({
            ...c.config,
            id: c.id,
            name: c.name,
            kind: c.kind,
            enabled: c.enabled,
          })),
          rules: rules.map((r) => ({ id: r.id, scope: r.scope, rule: r.rule })),
        },
        policies: await policiesOf(state),
        retention: { pins: pins.map((p) => ({ key: p.key, value: p.value })) },
      },
      resume: { runsRecordedTotal: global.runsRecordedTotal, jobs: rings },
      authority: {
        members: members.map((m) => ({
          subject: m.subject,
          role: m.role,
          email: m.email,
          grantedBy: m.grantedBy,
          grantedAt: m.grantedAt,
        })),
        customRoles: customRoles.map((r) => ({
          name: r.name,
          base: r.base,
          capabilities: r.capabilities,
          description: r.description,
        })),
      },
    },
  }) as ControlPlaneExport;
}

/** Counts for replies and audit rows. */
export function summaryOf(doc: ControlPlaneExport) {
  const s = doc.slices;
  return {
    jobs: s.configuration.jobs.length,
    channels: s.configuration.notify.channels.length,
    rules: s.configuration.notify.rules.length,
    policies: Object.keys(s.configuration.policies).length,
    runs: s.resume.jobs.reduce((n, r) => n + r.runs.length, 0),
    members: s.authority.members.length,
    customRoles: s.authority.customRoles.length,
  };
}
