/**
 * The support bundle's document (docs/support-bundle.md "Document"): presence-only booleans and
 * coarse enumerated counts an engineer needs to help, and nothing else.
 *
 * What is in it: engine and Node versions, platform, state backend kind, configuration presence
 * booleans, key presence booleans, job counts by source kind and by enabled/paused, destination
 * counts by kind (fs / s3), retained runs by status, the most frequent recent failure reasons
 * (closed-list strings only: anything else is counted as `other`), the audit head seq, pull
 * credential state per scope, and (POST only) a scrubbed ring of browser errors.
 *
 * What is never in it: job ids or names (they are operator-chosen and may name customers; the
 * bundle counts them instead), paths, URLs, bucket names, hosts, emails, subjects, keys,
 * fingerprints of operator keys, tokens, secrets, record names or any backup data.
 */
import { looksSecret, REDACTED } from '@coffer/audit';
import type { PullScope, RunRecord } from '@coffer/state';
import type { EngineFacts } from '../context.ts';
import { isFailureReason } from '../runs/reasons.ts';
import { adminTokenRetired } from '../state/index.ts';
import { ENGINE_VERSION, SERVICE_NAME } from '../version.ts';

export const DOCUMENT_KIND = 'engine-support-document';
export const MAX_BROWSER_ERRORS = 50;
export const MAX_BROWSER_ERROR_BYTES = 1024;
/** Failed runs looked at for `recentFailureReasons` (newest first across jobs). */
const RECENT_FAILURES = 50;

export interface BrowserErrorInput {
  message: string;
  at?: string;
  source?: string;
}

function count<K extends string>(into: Record<string, number>, key: K): void {
  into[key] = (into[key] ?? 0) + 1;
}

function destinationKind(description: string): string {
  if (description.startsWith('fs:')) return 'fs';
  if (description.startsWith('s3:')) return 's3';
  return 'other';
}

/** One browser error scrubbed: URLs cut to their origin; anything secret-looking redacted; bounded. */
export function scrubBrowserError(e: BrowserErrorInput): {
  message: string;
  at: string | null;
  source: string | null;
} {
  const clean = (text: string | undefined, max: number): string | null => {
    if (text === undefined) return null;
    let s = text.replace(/[\p{Cc}\p{Cf}]/gu, ' ');
    // URLs are cut to their origin: user info, path, query and fragment can all carry tokens.
    s = s.replace(/\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/@]*@)?([^\s/?#]*)\S*/gi, '$1$2');
    s = s
      .split(/(\s+)/)
      .map((w) => (looksSecret(w) === null ? w : REDACTED))
      .join('');
    return s.length > max ? `${s.slice(0, max - 3)}...` : s;
  };
  const at = e.at !== undefined && !Number.isNaN(Date.parse(e.at)) ? new Date(e.at).toISOString() : null;
  return { message: clean(e.message, 700) ?? '', at, source: clean(e.source, 200) };
}

/** Retained runs of every job (each job's ring, newest first). */
async function allRuns(ctx: EngineFacts, jobIds: string[]): Promise<RunRecord[]> {
  const runs: RunRecord[] = [];
  for (const id of jobIds) runs.push(...(await ctx.state.runs.listForJob(id)));
  return runs;
}

/** Builds the document. Throws the state store's errors (the caller fails closed). */
export async function buildSupportDocument(
  ctx: EngineFacts,
  headSeq: number,
  browserErrors: BrowserErrorInput[] | undefined,
  now: Date = new Date(),
): Promise<Record<string, unknown>> {
  const { config, keys, state } = ctx;
  const jobs = await state.jobs.list();
  const sourceKinds: Record<string, number> = {};
  let enabled = 0;
  for (const job of jobs) {
    const type = (job.config.source as { type?: unknown } | undefined)?.type;
    count(sourceKinds, typeof type === 'string' && /^[a-z0-9-]{1,32}$/.test(type) ? type : 'other');
    if (job.config.enabled !== false) enabled++;
  }
  const runs = await allRuns(
    ctx,
    jobs.map((j) => j.id),
  );
  const byStatus: Record<string, number> = {};
  for (const r of runs) count(byStatus, r.status);
  const failures = runs
    .filter((r) => r.status === 'failed' || r.status === 'abandoned')
    .sort((a, b) => b.seq - a.seq)
    .slice(0, RECENT_FAILURES);
  const reasons: Record<string, number> = {};
  for (const r of failures)
    count(reasons, r.reason !== null && isFailureReason(r.reason) ? r.reason : 'other');
  const counters = await state.runs.counters();
  const destinationKinds: Record<string, number> = {};
  for (const store of ctx.destinations.values()) count(destinationKinds, destinationKind(store.description));
  const credentials: Record<string, 'active' | 'expired' | 'none'> = {};
  for (const scope of ['diagnostics', 'audit-feed', 'metrics'] as PullScope[]) {
    const grant = await state.credentials.get(scope);
    credentials[scope] = !grant ? 'none' : Date.parse(grant.expiresAt) > now.getTime() ? 'active' : 'expired';
  }
  const document: Record<string, unknown> = {
    kind: DOCUMENT_KIND,
    v: 1,
    generatedAt: now.toISOString(),
    engine: {
      service: SERVICE_NAME,
      version: ENGINE_VERSION,
      node: process.version,
      platform: process.platform,
      arch: process.arch,
      uptimeMinutes: Math.floor((now.getTime() - ctx.startedAt.getTime()) / 60000),
    },
    state: { backend: state.backend },
    config: {
      adminTokenConfigured: config.adminToken !== undefined,
      adminTokenDisabled: config.adminTokenDisabled,
      adminTokenRetired: await adminTokenRetired(state),
      consoleOriginSet: config.consoleOrigin !== undefined,
      perimeterConfigured: config.perimeter !== undefined,
      scimConfigured: config.scimBearerToken !== undefined,
      tlsConfigured: config.tls !== undefined,
      restoreRootsCount: config.restoreRoots.length,
      harnessTestFaults: config.harnessTestFaults,
      demo: config.demo,
      logLevel: config.logLevel,
    },
    keys: {
      signerPresent: Boolean(keys.signer),
      operationalPresent: Boolean(keys.operational),
      breakGlassPresent: keys.breakGlass !== null,
      supportKeyPresent: keys.support !== null,
      ready: keys.ready,
      missing: [...keys.missing],
    },
    jobs: { total: jobs.length, enabled, paused: jobs.length - enabled, sourceKinds },
    destinations: { total: ctx.destinations.size, kinds: destinationKinds },
    runs: {
      retained: runs.length,
      recordedTotal: counters.runsRecordedTotal,
      byStatus,
      recentFailureReasons: Object.entries(reasons)
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .map(([reason, n]) => ({ reason, count: n })),
    },
    audit: { headSeq },
    pullCredentials: credentials,
  };
  if (browserErrors !== undefined) {
    document.browserErrors = browserErrors.slice(-MAX_BROWSER_ERRORS).map(scrubBrowserError);
  }
  return document;
}
