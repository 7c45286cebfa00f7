/**
 * Applying an export's slices to the state store (docs/control-plane.md "Restore", "Import"),
 * staging, emptiness and the clear used by the test-only route.
 *
 * Restore order (each step idempotent, so apply-staged can repeat it):
 * 1. resume: each job's history ring first (runs verbatim, counters raised past the highest seq),
 *    so that once a job exists the scheduler's first look at it already sees its history: the
 *    next run takes the next seq and `prevRunId` names the restored latest `ok` run;
 * 2. configuration: jobs at their exported `configRev`, notification channels and rules (sealed
 *    fields as exported), policies (but the owner-action gate), retention pins;
 * 3. authority (apply-staged only): custom roles, role assignments, the owner-action gate.
 *
 * Import applies jobs only (plus channels and rules when the export was signed by this engine's
 * own signer, whose operational key opens their sealed fields): no policy, pin, run or role.
 */
import type { State } from '@coffer/state';
import { isStateError } from '@coffer/state';
import { STALE_PREFIX, STAND_DOWN_PREFIX } from '../runs/index.ts';
import { PIN_PREFIX } from '../runs/pins.ts';
import {
  AUTHORITY_POLICY_KEYS,
  type AuthoritySlice,
  type ConfigurationSlice,
  POLICY_KEYS,
  type ResumeSlice,
} from './document.ts';

/** The staged restore (settings): the signed envelope and how it arrived. */
export const STAGED_SETTING = 'control-plane.staged';
/** Written once when a state store is first opened by this room (keys-predate-state reason). */
export const BIRTH_SETTING = 'control-plane.birth';

export interface StagedRestore {
  stagedAt: string;
  sealed: boolean;
  signerFingerprint: string;
  bodyHash: string | null;
  export: string;
  signature: string;
}

export interface Emptiness {
  empty: boolean;
  jobs: number;
  members: number;
  channels: number;
}

export async function emptiness(state: State): Promise<Emptiness> {
  const [jobs, members, channels] = await Promise.all([
    state.jobs.list(),
    state.roles.list(),
    state.notifications.listChannels(),
  ]);
  return {
    empty: jobs.length === 0 && members.length === 0 && channels.length === 0,
    jobs: jobs.length,
    members: members.length,
    channels: channels.length,
  };
}

export interface JobOutcome {
  id: string;
  outcome: 'restored' | 'imported' | 'exists';
  configRev: number;
  enabled: boolean;
}

export async function applyResume(
  state: State,
  resume: ResumeSlice,
): Promise<{ jobs: number; runs: number }> {
  let runs = 0;
  for (const ring of resume.jobs) {
    const r = await state.runs.restoreRing(ring.id, {
      runs: ring.runs,
      recordedTotal: ring.recordedTotal,
      rolledOver: ring.rolledOver,
      recordedFloor: resume.runsRecordedTotal,
    });
    runs += r.inserted;
    if (ring.standDown) await state.settings.set(`${STAND_DOWN_PREFIX}${ring.id}`, ring.standDown);
    if (ring.stale) await state.settings.setIfAbsent(`${STALE_PREFIX}${ring.id}`, ring.stale);
  }
  return { jobs: resume.jobs.length, runs };
}

async function putJob(
  state: State,
  job: ConfigurationSlice['jobs'][number],
  mode: 'restore' | 'import',
  disable: boolean,
): Promise<JobOutcome> {
  const existing = await state.jobs.get(job.id);
  if (existing)
    return {
      id: job.id,
      outcome: 'exists',
      configRev: existing.configRev,
      enabled: existing.config.enabled !== false,
    };
  const config = disable ? { ...job.config, enabled: false } : job.config;
  try {
    const stored = await state.jobs.restore(config as { id: string }, job.configRev);
    return {
      id: job.id,
      outcome: mode === 'restore' ? 'restored' : 'imported',
      configRev: stored.configRev,
      enabled: stored.config.enabled !== false,
    };
  } catch (e) {
    // Another writer created it between the look and the write: reported, never overwritten.
    if (!isStateError(e, 'ERR_STATE_CONFLICT')) throw e;
    const now = await state.jobs.get(job.id);
    return {
      id: job.id,
      outcome: 'exists',
      configRev: now?.configRev ?? 0,
      enabled: now?.config.enabled !== false,
    };
  }
}

export interface ConfigurationOutcome {
  jobs: JobOutcome[];
  channels: { applied: string[]; skipped: string[] };
  rules: { applied: string[]; skipped: string[] };
  policies: string[];
  pins: number;
}

/**
 * Applies the configuration slice. `restore`: everything but the authority-bound policies.
 * `import`: jobs (disabled when `disable`), channels and rules only with `withNotify`; an id that
 * exists here is reported and left as it is.
 */
export async function applyConfiguration(
  state: State,
  cfg: ConfigurationSlice,
  options: { mode: 'restore' | 'import'; disable: boolean; withNotify: boolean },
): Promise<ConfigurationOutcome> {
  const out: ConfigurationOutcome = {
    jobs: [],
    channels: { applied: [], skipped: [] },
    rules: { applied: [], skipped: [] },
    policies: [],
    pins: 0,
  };
  for (const job of cfg.jobs) out.jobs.push(await putJob(state, job, options.mode, options.disable));
  for (const c of cfg.notify.channels) {
    const id = String(c.id);
    if (!options.withNotify || (await state.notifications.getChannel(id))) {
      out.channels.skipped.push(id);
      continue;
    }
    const { id: _i, name, kind, enabled, ...config } = c;
    await state.notifications.putChannel({
      id,
      name: String(name),
      kind: String(kind),
      enabled: enabled === true,
      config,
    });
    out.channels.applied.push(id);
  }
  const existingRules = new Set((await state.notifications.listRules()).map((r) => r.id));
  for (const r of cfg.notify.rules) {
    if (!options.withNotify || existingRules.has(r.id)) {
      out.rules.skipped.push(r.id);
      continue;
    }
    await state.notifications.putRule({ id: r.id, scope: r.scope, rule: r.rule });
    out.rules.applied.push(r.id);
  }
  if (options.mode === 'restore') {
    for (const key of POLICY_KEYS) {
      if (AUTHORITY_POLICY_KEYS.includes(key) || !(key in cfg.policies)) continue;
      await state.settings.set(key, cfg.policies[key]);
      out.policies.push(key);
    }
    for (const pin of cfg.retention.pins) {
      if (!pin.key.startsWith(PIN_PREFIX)) continue;
      await state.settings.set(pin.key, pin.value);
      out.pins++;
    }
  }
  return out;
}

export async function applyAuthority(
  state: State,
  authority: AuthoritySlice,
  policies: Record<string, unknown>,
): Promise<{ members: number; customRoles: number; policies: string[] }> {
  for (const r of authority.customRoles)
    await state.roles.putCustomRole({
      name: r.name,
      base: r.base,
      capabilities: r.capabilities,
      description: r.description ?? null,
    });
  for (const m of authority.members)
    await state.roles.assign({
      subject: m.subject,
      role: m.role,
      email: m.email ?? null,
      grantedBy: m.grantedBy ?? null,
      ...(m.grantedAt ? { grantedAt: m.grantedAt } : {}),
    });
  const applied: string[] = [];
  for (const key of AUTHORITY_POLICY_KEYS) {
    if (!(key in policies)) continue;
    await state.settings.set(key, policies[key]);
    applied.push(key);
  }
  return { members: authority.members.length, customRoles: authority.customRoles.length, policies: applied };
}

/**
 * Wipes the control plane (test-only route): jobs (their rings go with them), role assignments
 * and custom roles, notification channels and rules, policies, scheduler and retention settings
 * and any staged restore. Keys, archives and the audit chain are never touched.
 */
export async function clearControlPlane(
  state: State,
): Promise<{ jobs: number; members: number; channels: number }> {
  const jobs = await state.jobs.list();
  for (const j of jobs) await state.jobs.delete(j.id);
  const members = await state.roles.list();
  for (const m of members) await state.roles.remove(m.subject);
  for (const r of await state.roles.listCustomRoles()) await state.roles.deleteCustomRole(r.name);
  const channels = await state.notifications.listChannels();
  for (const c of channels) await state.notifications.deleteChannel(c.id);
  for (const r of await state.notifications.listRules()) await state.notifications.deleteRule(r.id);
  for (const key of POLICY_KEYS) await state.settings.delete(key);
  for (const prefix of [PIN_PREFIX, STAND_DOWN_PREFIX, STALE_PREFIX])
    for (const row of await state.settings.list(prefix)) await state.settings.delete(row.key);
  await state.settings.delete(STAGED_SETTING);
  return { jobs: jobs.length, members: members.length, channels: channels.length };
}
