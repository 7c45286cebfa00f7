/**
 * Durable restore applies: every apply's state and per-record progress live in the state store as
 * it goes, so an engine that crashes (or a host that loses power) mid-apply loses nothing
 * (docs/restore.md section 5, "Durability").
 *
 * - `restore.apply.<applyId>`: the apply's row (status, progress, plan hash, the validated request,
 *   the audit actor, the holder), rewritten at every progress flush and at the end.
 * - `restore.progress.<applyId>.<n>`: the names written since the previous flush. A flush happens
 *   every batch (160 records with `onExisting: skip`, else 200), at most every 2 s, and after every
 *   record of a sqlite target; records written after the last flush are simply written again on
 *   resume (each write is idempotent for the same bytes).
 * - The lease `restore-apply:<applyId>` is held (and renewed, fenced: src/tasks/leased-tasks.ts) by
 *   the process running the apply. Lost (this process was paused past its expiry and another
 *   took the apply over, or renewals failed until it expired), the apply stops at once and this
 *   process writes nothing more about it: no progress, no row, no approval settlement, no audit
 *   event; the final settlement checks the lease first (`assertHeld`).
 *
 * After a crash the apply is NOT resumed by itself: at start (and every 30 s, for a crashed
 * replica) a `running` row whose lease is free is marked `interrupted` (audited as a failed
 * `restore-apply`). A caller with `restore.apply` resumes it explicitly (`POST
 * /admin/restore/resume`), which passes the gates again (approval for the same plan hash), runs
 * phase one again, and writes only the records not recorded as written, each re-verified.
 *
 * Notification events (src/events.ts): once an apply's final row is settled by its holder, it
 * raises `restore-applied` (succeeded), `restore-fell-short` (completed with failures, aborted, or
 * an error) or `restore-cancelled` (cancelled live, or an interrupted apply cancelled for good).
 * An apply left `interrupted` (graceful stop, crash) raises nothing: it is not over. A lost lease
 * raises nothing.
 *
 * Security-relevant behaviour: the stored request is the validated RestoreRequest (no tokens: the
 * fields that carry one are refused at validation); progress rows hold record names only, never
 * bytes; a record is recorded only after its verified bytes were written.
 */
import type { ApplyOptions, ApplyProgress, ApplyReceipt, RestoreRequest } from '@coffer/restore';
import { applyRestore, isRestoreError, settleRestoreApproval } from '@coffer/restore';
import type { Lease, State } from '@coffer/state';
import type { FastifyBaseLogger } from 'fastify';
import { ENGINE_ACTOR, type EngineAudit } from '../audit/index.ts';
import { type EngineEvents, hashPrefix } from '../events.ts';
import { acquirePin, pinId, releasePin } from '../runs/pins.ts';
import { LeasedTasks } from '../tasks/leased-tasks.ts';

export const APPLY_PREFIX = 'restore.apply.';
export const PROGRESS_PREFIX = 'restore.progress.';
const FLUSH_MS = 2000;
const LEASE_MS = 60_000;
const SWEEP_MS = 30_000;

export type ApplyStatus = 'running' | 'interrupted' | ApplyReceipt['status'] | 'error';

/** The stored row of one apply (docs/restore.md "Apply reply and progress"). */
export interface ApplyRow {
  applyId: string;
  status: ApplyStatus;
  planHash: string;
  runId: string;
  job: string | null;
  startedAt: string;
  progress: ApplyProgress | null;
  receipt?: ApplyReceipt;
  error?: string;
  /** Records recorded as written (durable), over every attempt. */
  recordedWritten: number;
  attempts: number;
  interruptedAt?: string;
  holder: string;
  request: RestoreRequest;
  approvalId: string | null;
  actor: ReturnType<EngineAudit['actorOf']>;
}

type Approval = Parameters<typeof settleRestoreApproval>[0]['approval'];

export interface LaunchOptions {
  row: ApplyRow;
  options: ApplyOptions;
  approval: Approval | null;
  release: (() => Promise<void>) | null;
  completed: string[];
  /** The plan's target type (sqlite progress is recorded after every record). */
  targetType: string;
}

const leaseName = (id: string) => `restore-apply:${id}`;

/** The caller-facing view of a row (no actor, holder or stored request internals). */
export function applyView(row: ApplyRow): Record<string, unknown> {
  const { actor: _a, holder: _h, request: _r, approvalId: _p, ...rest } = row;
  return { ...rest, ...(row.status === 'interrupted' ? { resumable: true } : {}) };
}

export interface ApplyTrackerOptions {
  state: State;
  audit: EngineAudit;
  log: FastifyBaseLogger;
  /** This process's holder id (the run service's persisted instance id + `:restore`). */
  holder: string;
  /** The notification event bus (app.events); absent: nothing is raised. */
  events?: EngineEvents | null;
  /** Called when an apply of this process ends (however it ends). */
  onSettled?: () => void;
}

export class ApplyTracker {
  readonly holder: string;
  private readonly o: ApplyTrackerOptions;
  /** The applies running in this process, under their leases. */
  private readonly tasks: LeasedTasks;
  /** The rows of the live applies (progress is read from here while they run). */
  private readonly rows = new Map<string, ApplyRow>();
  /** Leases this process acquired and not yet handed to `launch` (their fencing tokens). */
  private readonly claimed = new Map<string, Lease>();
  private sweepTimer: NodeJS.Timeout | null = null;

  /**
   * Applies running in this process now (launched: a row is set before the 202 reply). Claimed
   * leases are not counted: one whose launch failed may stay claimed until its lease lapses, and
   * must not hold back the idle release for that long.
   */
  get active(): number {
    return this.rows.size;
  }

  constructor(options: ApplyTrackerOptions) {
    this.o = options;
    this.holder = options.holder;
    this.tasks = new LeasedTasks({
      leases: options.state.leases,
      holder: options.holder,
      ttlMs: LEASE_MS,
      onLost: (key, lease, reason) =>
        options.log.warn(
          { event: 'restore-apply-lease-lost', applyId: key, fence: lease.fence, reason },
          'restore apply stopped: its lease was lost; this process records nothing more about it',
        ),
    });
  }

  private get settings() {
    return this.o.state.settings;
  }

  liveRows(): ApplyRow[] {
    return [...this.rows.values()];
  }

  async get(id: string): Promise<ApplyRow | null> {
    return this.rows.get(id) ?? (await this.settings.get<ApplyRow>(`${APPLY_PREFIX}${id}`)) ?? null;
  }

  /** Cancels a live apply; marks a stored `interrupted` one `cancelled` (no longer resumable). */
  async cancel(id: string): Promise<ApplyRow | null> {
    const live = this.tasks.get(id);
    const liveRow = this.rows.get(id);
    if (live && liveRow) {
      live.abort();
      return liveRow;
    }
    const row = await this.settings.get<ApplyRow>(`${APPLY_PREFIX}${id}`);
    if (row?.status !== 'interrupted') return row ?? null;
    row.status = 'cancelled';
    await this.settings.set(`${APPLY_PREFIX}${id}`, row);
    await releasePin(this.settings, pinId.apply(id));
    this.raiseEnded(row);
    return row;
  }

  /** The notification event of an apply that ended (its row already written); none otherwise. */
  private raiseEnded(row: ApplyRow): void {
    const name =
      row.status === 'succeeded'
        ? 'restore-applied'
        : row.status === 'cancelled'
          ? 'restore-cancelled'
          : row.status === 'completed-with-failures' || row.status === 'aborted' || row.status === 'error'
            ? 'restore-fell-short'
            : null;
    if (name === null) return;
    const r = row.receipt;
    this.o.events?.raise({
      name,
      jobId: row.job,
      detail: {
        applyId: row.applyId,
        runId: row.runId,
        planHash: hashPrefix(row.planHash),
        status: row.status,
        written: r ? r.written : row.recordedWritten,
        failed: r ? r.failedCount : (row.progress?.failed ?? 0),
        skipped: r ? r.skippedCount : (row.progress?.skipped ?? 0),
        alreadyDone: r ? r.alreadyDone : 0,
        attempts: row.attempts,
        failureCode: r?.failure?.code ?? null,
      },
    });
  }

  /** Takes the apply's lease (null when another live process holds it). */
  async claim(id: string): Promise<boolean> {
    const lease = await this.tasks.acquire(leaseName(id));
    if (lease !== null) this.claimed.set(id, lease);
    return lease !== null;
  }

  async unclaim(id: string): Promise<void> {
    const lease = this.claimed.get(id);
    this.claimed.delete(id);
    if (lease) await this.tasks.release(lease);
  }

  /**
   * Pins the apply's run against retention until the apply ends (an interrupted apply keeps it
   * for its resume; a cancel releases it). Call before `launch`.
   */
  async pin(row: Pick<ApplyRow, 'applyId' | 'job' | 'runId'>): Promise<void> {
    await acquirePin(this.settings, {
      id: pinId.apply(row.applyId),
      purpose: 'restore-apply',
      job: row.job,
      runId: row.runId,
    });
  }

  /** Names recorded as written by earlier attempts. */
  async completed(id: string): Promise<string[]> {
    const rows = await this.settings.list(`${PROGRESS_PREFIX}${id}.`);
    return rows.flatMap((r) => (Array.isArray(r.value) ? (r.value as string[]) : []));
  }

  /**
   * Runs phases 3 and 4 in the background under the apply's lease (already claimed), persisting
   * progress; settles the approval and writes the `restore-apply` audit event at the end.
   */
  launch(l: LaunchOptions): void {
    const { row, approval } = l;
    const state = this.o.state;
    const key = `${APPLY_PREFIX}${row.applyId}`;
    const claimed = this.claimed.get(row.applyId);
    this.claimed.delete(row.applyId);
    if (claimed === undefined) throw new Error(`apply ${row.applyId} launched without its lease`);
    this.rows.set(row.applyId, row);
    this.tasks.adopt(row.applyId, claimed, async (ctx) => {
      const skipMode = row.request.onExisting === 'skip';
      const batch = skipMode ? 160 : 200;
      // A sqlite record is a whole table: recorded as soon as it is written.
      const everyRecord = l.targetType === 'sqlite';
      let seq = 0;
      let pending: string[] = [];
      let lastFlush = Date.now();
      const flush = async () => {
        // Each flush rewrites the row: only while the lease is held (a fenced check first, which
        // throws, and so stops the apply, when another holder has it).
        if (ctx.lost) return;
        await ctx.lease.assertHeld();
        const names = pending;
        pending = [];
        lastFlush = Date.now();
        const n = seq++;
        if (names.length > 0) {
          await this.settings.set(`${PROGRESS_PREFIX}${row.applyId}.${row.attempts}-${n}`, names);
          row.recordedWritten += names.length;
        }
        await this.settings.set(key, row);
      };
      try {
        await this.settings.set(key, row);
        const receipt = await applyRestore({
          ...l.options,
          completed: l.completed,
          signal: ctx.signal,
          onProgress: (p) => {
            row.progress = p;
          },
          onRecord: async (o) => {
            if (o.outcome !== 'written') return;
            pending.push(o.name);
            if (everyRecord || pending.length >= batch || Date.now() - lastFlush >= FLUSH_MS) await flush();
          },
        });
        // The commit point: the row, the approval and the audit event are this holder's to write
        // only while it still holds the lease (flush checks it first, and throws when lost).
        await flush();
        if (ctx.lost) return;
        if (ctx.stopping && receipt.status === 'cancelled') {
          // A graceful stop interrupts (resumable), it does not cancel.
          await this.markInterrupted(row);
          return;
        }
        row.receipt = receipt;
        row.status = receipt.status;
        const consumed = approval
          ? await settleRestoreApproval({ approvals: state.approvals, approval, receipt })
          : false;
        if (consumed && approval) await releasePin(this.settings, pinId.approval(approval.id));
        await this.o.audit.append({
          ...row.actor,
          action: 'restore-apply',
          outcome: receipt.status === 'succeeded' ? 'applied' : 'failed',
          target: receipt.job,
          approver:
            consumed && approval?.decidedBy
              ? { email: approval.decidedByEmail, subject: approval.decidedBy }
              : null,
          detail: {
            planHash: receipt.planHash,
            runId: receipt.runId,
            written: receipt.written,
            skipped: receipt.skippedCount,
            cancelled: receipt.cancelled,
            status: receipt.status,
            ...(row.attempts > 1 ? { attempt: row.attempts, alreadyDone: receipt.alreadyDone } : {}),
          },
        });
      } catch (e) {
        if (ctx.lost) return;
        row.status = 'error';
        row.error = isRestoreError(e) ? e.message : 'restore apply failed';
        this.o.log.warn(
          { applyId: row.applyId, code: (e as { code?: unknown }).code },
          'restore apply failed',
        );
      } finally {
        if (!ctx.lost) {
          // An engine that lost the lease leaves the pin to the new holder, which releases it. The
          // row is settled before the lease goes (LeasedTasks releases it once this returns), so
          // no other engine sees it running unheld.
          if (row.status !== 'interrupted') await releasePin(this.settings, pinId.apply(row.applyId));
          await this.settings.set(key, row).catch(() => undefined);
          // The apply is over (unless left interrupted): its event, after its row.
          this.raiseEnded(row);
        }
        // Its own approval reservation only (released by holder): harmless, and frees it at once.
        await l.release?.();
        this.rows.delete(row.applyId);
        this.o.onSettled?.();
      }
    });
  }

  /**
   * Marks `running` rows whose apply no live process holds as `interrupted` (audited). Returns
   * their ids.
   */
  async sweep(): Promise<string[]> {
    const out: string[] = [];
    for (const { key, value } of await this.settings.list(APPLY_PREFIX)) {
      const row = value as ApplyRow;
      if (row?.status !== 'running' || this.tasks.has(row.applyId)) continue;
      if (!(await this.claim(row.applyId))) continue;
      try {
        const fresh = await this.settings.get<ApplyRow>(key);
        if (fresh?.status !== 'running' || this.tasks.has(row.applyId)) continue;
        await this.markInterrupted(fresh);
        out.push(fresh.applyId);
      } finally {
        await this.unclaim(row.applyId);
      }
    }
    return out;
  }

  private async markInterrupted(row: ApplyRow): Promise<void> {
    row.status = 'interrupted';
    row.interruptedAt = new Date().toISOString();
    await this.settings.set(`${APPLY_PREFIX}${row.applyId}`, row);
    this.o.log.warn(
      { event: 'restore-apply-interrupted', applyId: row.applyId, written: row.recordedWritten },
      'restore apply interrupted (engine stopped mid-apply): resume with POST /admin/restore/resume',
    );
    await this.o.audit.append({
      actor: { ...ENGINE_ACTOR },
      action: 'restore-apply',
      outcome: 'failed',
      target: row.job,
      detail: {
        planHash: row.planHash,
        runId: row.runId,
        written: row.recordedWritten,
        skipped: row.progress?.skipped ?? 0,
        cancelled: false,
        status: 'interrupted',
      },
    });
  }

  /** Sweeps now and every 30 s (a crashed replica's applies are found once its lease expires). */
  startSweeps(): void {
    void this.sweep().catch(() => undefined);
    this.sweepTimer = setInterval(() => void this.sweep().catch(() => undefined), SWEEP_MS);
    this.sweepTimer.unref();
  }

  /**
   * Graceful stop: no more sweeps; live applies stop after the writes in flight, their progress is
   * flushed and they are left `interrupted` (resumable), as a crash would leave them.
   */
  async stop(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    await this.tasks.stop();
  }
}
