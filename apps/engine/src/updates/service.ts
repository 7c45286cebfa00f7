/**
 * `UpdateService`: the engine's side of the update lifecycle (docs/updates.md "Engine routes"),
 * over @coffer/update's pure machine and the persisted state in store.ts. It fetches and verifies
 * the configured channel (the pinned signer, expiry, the persisted sequence), reports what it
 * offers, and runs apply, ramp, settle and rollback through the machine, persisting each record
 * the machine hands back before the effect that follows it.
 *
 * Promote (docs/updates.md "Promote and restart"): the console's pointer switches in place; the
 * engine's `current` pointer switches to the unpacked release (release-artefact.ts) and the engine
 * then restarts into it: the record is persisted `settling` first, the request is answered
 * `restarting` (202), and the `restart` hook (main.ts: close the app, re-execute through the
 * launcher, same process id) runs after the reply. The new program settles the record at start
 * (`resumeAfterStart`): by the canary after ENGINE_UPDATE_SETTLE_DELAY_SECONDS or at the first
 * canary flight before that (`settleByCanary`), with the specification's retries for an undecided
 * verdict; a dead canary persists the outcome, switches the pointer back and restarts again. A
 * promoted release the launcher could not enter (launcher.ts boot counter) is settled dead by the
 * installed program that runs instead. In container mode the orchestrator swaps the image and the
 * new container settles the same way.
 *
 * Ramp: a replica follows a ramp when `inRamp(instanceId, version, percentage)` (its stable
 * instance id), both when it takes the request and when it reconciles (`reconcileReplica`, at
 * start and after every canary flight): the version each replica should run follows the latest
 * ramp-shaped record (in the ramp: the target; otherwise, or after a dead verdict, the version it
 * came from; after `ramp/settle alive`, the target everywhere).
 *
 * Security-relevant behaviour: the channel is trusted only through the pinned signer key file
 * (both signature halves); the accepted sequence and digest are persisted so a replayed or lowered
 * document is refused across restarts; the floor is read from the store on every check and only
 * raised; artefacts are downloaded only against the one verified document; a live step needs the
 * deploy token, checked by the route before this service is called.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  advance,
  CANARY_RETRY_SCHEDULE,
  type CanaryVerdict,
  type ChannelTrust,
  type ComponentName,
  ContainerDeployer,
  createUpdateExecutor,
  type Deployer,
  DirectoryDeployer,
  downloadArtefact,
  type Effect,
  fetchChannel,
  inRamp,
  isUpdateError,
  LIFECYCLE_STEPS,
  type LifecycleStep,
  type Step,
  settleRamp,
  settleRecord,
  startApply,
  startRamp,
  startRollback,
  trustFromKeyFile,
  UpdateError,
  type UpdateErrorCode,
  type UpdateEvent,
  type UpdateExecutor,
  type UpdateRecord,
  type VerifiedChannel,
} from '@coffer/update';
import type { FastifyBaseLogger } from 'fastify';
import type { EngineConfig } from '../config.ts';
import { ConfigError } from '../errors.ts';
import { baseVersion, clearBootMark, currentRelease } from '../launcher.ts';
import type { State } from '../state/index.ts';
import { ENGINE_VERSION } from '../version.ts';
import { unpackEngineRelease } from './release-artefact.ts';
import { type AcceptedChannel, UpdateStore } from './store.ts';
import { type UpdatesView, verifiedView } from './view.ts';

export type { ComponentView, UpdatesView } from './view.ts';

/** The state schema epoch this engine build runs on (until an update settles another one). */
export const ENGINE_SCHEMA_EPOCH = 1;

/** Steps the engine adds in front of the machine's: the channel fetch and the deploy token. */
export type EngineStep = LifecycleStep | 'channel' | 'deploy-token';

/** What an apply, ramp, settle or rollback ended with (the route maps it onto the reply). */
export interface UpdateResult {
  outcome:
    | 'no-update'
    | 'refused'
    | 'dry-run'
    | 'uploaded'
    | 'applied'
    | 'rolled-back'
    | 'rollback-failed'
    | 'awaiting-canary'
    | 'ramping'
    | 'restarting';
  step: EngineStep | null;
  code: UpdateErrorCode | null;
  message: string | null;
  /** Lifecycle steps passed before the one that stopped it, in order. */
  passed: LifecycleStep[];
  record: UpdateRecord | null;
  /** Container mode: what the orchestrator must do once the release is uploaded. */
  orchestrator?: { message: string };
  /** The engine restarts into another program after this reply (the pointer moved). */
  restart?: boolean;
}

/** The canary as the update lifecycle uses it (plugins/canary.ts `app.canary`). */
export interface CanaryPort {
  fly(trigger: 'schedule' | 'tick' | 'settle' | 'boot'): Promise<{ verdict: CanaryVerdict }>;
  selfCheck(): Promise<'alive' | 'dead'>;
}

export interface UpdateServiceOptions {
  state: State;
  config: EngineConfig;
  log: FastifyBaseLogger;
  /** Test-only: the version this engine reports as running (default ENGINE_VERSION). */
  engineVersion?: string;
  /** Test-only: the clock (ms since the epoch). */
  now?: () => number;
  /** The canary; without it every verdict is `undecided` (the record awaits an operator). */
  canary?: CanaryPort;
  /** This replica's stable instance id (runs/instance-id.ts), for the ramp. */
  instanceId?: string;
  /**
   * Restarts the process into whatever program the pointer names (main.ts: close, re-execute).
   * Without it (an engine inside a test process) a moved pointer is only logged.
   */
  restart?: () => Promise<void> | void;
  /** Test-only: waits between canary retries (default a real timer). */
  wait?: (ms: number) => Promise<void>;
}

const INPUT_CODES: ReadonlySet<string> = new Set([
  'ERR_UPDATE_INVALID_ARGUMENT',
  'ERR_UPDATE_UNKNOWN_COMPONENT',
  'ERR_UPDATE_RAMP_CONSOLE',
]);

/** True for the codes that mean "the request itself is wrong" (400); every other one is 409. */
export function isInputCode(code: string | null | undefined): boolean {
  return typeof code === 'string' && INPUT_CODES.has(code);
}

function passedBefore(step: LifecycleStep | null): LifecycleStep[] {
  if (step === null) return [];
  const i = LIFECYCLE_STEPS.indexOf(step);
  return i < 0 ? [] : LIFECYCLE_STEPS.slice(0, i);
}

export class UpdateService {
  readonly store: UpdateStore;
  readonly engineVersion: string;
  readonly #config: EngineConfig;
  readonly #log: FastifyBaseLogger;
  readonly #now: () => number;
  readonly #trust: ChannelTrust | undefined;
  readonly #canary: CanaryPort | undefined;
  readonly #instanceId: string;
  readonly #restart: UpdateServiceOptions['restart'];
  readonly #wait: (ms: number) => Promise<void>;
  readonly #base: string;
  #checking: Promise<UpdatesView> | null = null;
  /** Set when the engine pointer now names another program than the running one. */
  #moved = false;
  #restartScheduled = false;
  #settleTimer: NodeJS.Timeout | null = null;
  /** One settle or reconcile at a time (a canary flight and a timer may race). */
  #serial: Promise<unknown> = Promise.resolve();
  /**
   * Work in progress (a drive, or a settle/reconcile): the canary's listener does not queue
   * behind it, because the work itself may be waiting for that very flight (re-entrancy).
   */
  #busy = 0;

  constructor(options: UpdateServiceOptions) {
    this.store = new UpdateStore(options.state);
    this.engineVersion = options.engineVersion ?? ENGINE_VERSION;
    this.#config = options.config;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
    this.#canary = options.canary;
    this.#instanceId = options.instanceId ?? 'single';
    this.#restart = options.restart;
    this.#wait = options.wait ?? ((ms) => sleep(ms));
    this.#base = baseVersion(this.engineVersion);
    const u = options.config.update;
    if (u !== undefined) {
      try {
        this.#trust = trustFromKeyFile(u.signerPublicKey.text);
      } catch {
        throw new ConfigError('ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'must hold a signer public key file');
      }
    }
  }

  get configured(): boolean {
    return this.#config.update !== undefined;
  }

  /** The signer fingerprint the channel is pinned to, when configured. */
  get signer(): string | null {
    return this.#trust?.fingerprint ?? null;
  }

  /** A live apply needs somewhere to put the release: always for `directory`, an image for `container`. */
  get destinationConfigured(): boolean {
    const u = this.#config.update;
    return u !== undefined && (u.deployer === 'directory' || u.image !== undefined);
  }

  #iso(): string {
    return new Date(this.#now()).toISOString();
  }

  #consoleDeployer(): DirectoryDeployer {
    return new DirectoryDeployer({ dataDir: this.#config.dataDir, component: 'console' });
  }

  #engineDirectory(): DirectoryDeployer {
    return new DirectoryDeployer({ dataDir: this.#config.dataDir, unpack: unpackEngineRelease });
  }

  #deployers(): Partial<Record<ComponentName, Deployer>> {
    const u = this.#config.update;
    const running = this.engineVersion;
    let engine: Deployer;
    if (u?.deployer === 'container') engine = new ContainerDeployer({ image: u.image ?? 'unset', running });
    else {
      const d = this.#engineDirectory();
      const base = this.#base;
      const dataDir = this.#config.dataDir;
      engine = {
        mode: d.mode,
        // Without a pointer the installed program runs (launcher.ts).
        live: async () => (await d.live()) ?? base,
        upload: (v, p) => d.upload(v, p),
        readBack: (v) => d.readBack(v),
        promote: async (v) => {
          // The installed program is not a release: going back to it removes the pointer.
          const toBase = v === null || (v === base && !existsSync(join(d.releasesDir, v, 'release.json')));
          const note = await d.promote(toBase ? null : v);
          const now = currentRelease(dataDir) ?? base;
          this.#moved = now !== running;
          return note;
        },
      };
    }
    return { engine, console: this.#consoleDeployer() };
  }

  async running(): Promise<{ engine: string; console: string | null }> {
    let consoleVersion: string | null = null;
    try {
      consoleVersion = await this.#consoleDeployer().live();
    } catch {
      consoleVersion = null;
    }
    return { engine: this.engineVersion, console: consoleVersion };
  }

  async schemaEpoch(): Promise<number> {
    return (await this.store.schemaEpoch()) ?? ENGINE_SCHEMA_EPOCH;
  }

  /** Fetches and verifies the channel against the persisted sequence; persists the accepted one. */
  async fetch(): Promise<VerifiedChannel> {
    const u = this.#config.update;
    if (u === undefined || this.#trust === undefined)
      throw new UpdateError('ERR_UPDATE_TRUST_CONFIG', 'no update channel is configured');
    const last = await this.store.accepted();
    const channel = await fetchChannel(u.channel, {
      trust: this.#trust,
      ...(u.ca !== undefined ? { ca: u.ca } : {}),
      ...(last !== null ? { lastSequence: last.sequence, lastDigest: last.digest } : {}),
      now: this.#now(),
    });
    await this.store.accept(channel.document.sequence, channel.digest, this.#iso());
    return channel;
  }

  /**
   * `GET /admin/updates`: never throws for a channel problem; states it in the view. Concurrent
   * checks share one fetch (any authenticated caller may ask, so callers cannot multiply the
   * requests the engine makes to the channel host).
   */
  check(): Promise<UpdatesView> {
    if (this.#checking === null)
      this.#checking = this.#check().finally(() => {
        this.#checking = null;
      });
    return this.#checking;
  }

  async #check(): Promise<UpdatesView> {
    const [running, floors, schemaEpoch] = await Promise.all([
      this.running(),
      this.store.floors(),
      this.schemaEpoch(),
    ]);
    const base = {
      configured: this.configured,
      verified: false,
      running,
      floors,
      schemaEpoch,
      lastAccepted: null as AcceptedChannel | null,
    };
    if (!this.configured) return { ...base, lastAccepted: await this.store.accepted() };
    let channel: VerifiedChannel;
    try {
      channel = await this.fetch();
    } catch (e) {
      if (!isUpdateError(e)) throw e;
      this.#log.warn({ update: 'channel', code: e.code }, 'update channel not verified');
      return { ...base, lastAccepted: await this.store.accepted(), code: e.code, error: e.message };
    }
    base.lastAccepted = await this.store.accepted();
    return { ...base, ...verifiedView(channel, running, floors, schemaEpoch) };
  }

  /** `GET /admin/update/status`. */
  async status() {
    const [record, floors, lastAccepted, schemaEpoch, running] = await Promise.all([
      this.store.record(),
      this.store.floors(),
      this.store.accepted(),
      this.schemaEpoch(),
      this.running(),
    ]);
    return {
      configured: this.configured,
      deployer: this.#config.update?.deployer ?? null,
      destinationConfigured: this.destinationConfigured,
      promote:
        this.#config.update?.deployer === 'container' ? ('orchestrator' as const) : ('restart' as const),
      instanceId: this.#instanceId,
      running,
      record,
      floors,
      lastAccepted,
      schemaEpoch,
    };
  }

  #refused(step: EngineStep, code: UpdateErrorCode | null, message: string): UpdateResult {
    return { outcome: 'refused', step, code, message, passed: [], record: null };
  }

  async #channelOr(): Promise<VerifiedChannel | UpdateResult> {
    if (!this.configured) return this.#refused('channel', null, 'no update channel is configured');
    try {
      return await this.fetch();
    } catch (e) {
      if (!isUpdateError(e)) throw e;
      return this.#refused('channel', e.code, e.message);
    }
  }

  /**
   * `POST /admin/update/apply` and `POST /admin/update/ramp`. `percentage` makes it a ramp.
   * Throws UpdateError for a bad request (unknown component, the console in a ramp, a bad
   * percentage).
   */
  async apply(input: {
    dryRun: boolean;
    components?: ComponentName[];
    allowDowngrade?: boolean;
    readBack?: 'warn' | 'enforce';
    percentage?: number;
    /** `approved`: a second owner approved it (updates/approval.ts); may carry a migration. */
    path?: 'one-click' | 'approved';
    /** The channel document digest an approval was given for: any other document is refused. */
    expectDigest?: string;
  }): Promise<UpdateResult> {
    const ramp = input.percentage !== undefined;
    if (ramp && (input.components ?? []).some((c) => c !== 'engine'))
      throw new UpdateError(
        'ERR_UPDATE_RAMP_CONSOLE',
        'the ramp moves the engine only; the console cannot ramp',
      );
    if (!input.dryRun) {
      // A promoted update still awaiting its verdict (or a rollback in flight) is never replaced.
      const current = await this.store.record();
      if (current !== null && current.status === 'pending' && current.phase !== 'uploading')
        return {
          ...this.#refused('settle', null, 'an update awaits its verdict: settle or roll it back first'),
          record: current,
        };
    }
    const channel = await this.#channelOr();
    if (!('digest' in channel)) return channel;
    if (input.expectDigest !== undefined && channel.digest !== input.expectDigest)
      return this.#refused(
        'channel',
        null,
        'the channel no longer offers the release that was approved: request the update again',
      );
    const [running, floors, schemaEpoch] = await Promise.all([
      this.running(),
      this.store.floors(),
      this.schemaEpoch(),
    ]);
    const common = {
      channel,
      running,
      floors,
      runningSchemaEpoch: schemaEpoch,
      ...(input.allowDowngrade !== undefined ? { allowDowngrade: input.allowDowngrade } : {}),
      dryRun: input.dryRun,
      ...(input.readBack !== undefined ? { readBack: input.readBack } : {}),
      destinationConfigured: this.destinationConfigured,
      id: `upd_${this.#now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`,
      now: this.#iso(),
      ...(input.components !== undefined ? { components: input.components } : {}),
    };
    const first = ramp
      ? startRamp({ ...common, percentage: input.percentage! })
      : startApply({ ...common, ...(input.path !== undefined ? { path: input.path } : {}) });
    const executor = createUpdateExecutor({
      channel,
      deployers: this.#deployers(),
      download: {
        dir: join(this.#config.dataDir, 'update-downloads'),
        ...(this.#config.update?.ca !== undefined ? { ca: this.#config.update.ca } : {}),
      },
      persist: (r) => this.store.putRecord(r),
      canary: (check) => this.#flight(check),
      ramp: (component, version, percentage) => this.#rampPromote(component, version, percentage),
      wait: this.#wait,
      now: () => this.#iso(),
    });
    return this.#drive(first, executor);
  }

  /** One canary flight or the self-check, as the machine asks for it. */
  async #flight(check: 'flight' | 'self-check'): Promise<CanaryVerdict> {
    if (this.#canary === undefined) return 'undecided';
    // A self-check proves this build seals and verifies; only its failure decides anything.
    if (check === 'self-check') return (await this.#canary.selfCheck()) === 'dead' ? 'dead' : 'undecided';
    return (await this.#canary.fly('settle')).verdict;
  }

  /** The ramp's promote on the replica that took the request: it follows only when in the ramp. */
  async #rampPromote(component: ComponentName, version: string, percentage: number): Promise<void> {
    if (!inRamp(this.#instanceId, version, percentage)) return;
    const d = this.#deployers()[component];
    if (!d) throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `no deployer for ${component}`);
    await d.promote(version);
  }

  /**
   * Runs the machine to its stop, persisting each record before the effect after it. When a
   * promote moved the engine's pointer (directory mode) or asked the orchestrator to (container
   * mode), the drive stops there with `restarting`: the record is persisted as the machine left it
   * (`settling`, or `ramping`), and the program the pointer names settles it after the restart.
   */
  async #drive(first: Step, executor: UpdateExecutor): Promise<UpdateResult> {
    this.#busy++;
    try {
      return await this.#driveSteps(first, executor);
    } finally {
      this.#busy--;
    }
  }

  async #driveSteps(first: Step, executor: UpdateExecutor): Promise<UpdateResult> {
    let step = first;
    this.#moved = false;
    for (;;) {
      if (step.persist) await executor.persist(step.persist);
      if (step.effect.do === 'stop') return this.#withRestart(await this.#stopResult(step.effect.reply));
      const effect = step.effect as Exclude<Effect, { do: 'stop' }>;
      const event = await this.#run(executor, effect);
      step = advance(step.state, event, this.#iso());
      if (this.#restartsHere(effect, event, step)) {
        // The machine's next step persists `settling` (or stops `ramping`): persist it, answer.
        const record = step.persist ?? step.state.record;
        await executor.persist(record);
        return this.#withRestart(this.#restartingResult(effect.version, record));
      }
    }
  }

  /** Runs one effect; a throw becomes the machine's `failed` event. */
  async #run(executor: UpdateExecutor, effect: Exclude<Effect, { do: 'stop' }>): Promise<UpdateEvent> {
    try {
      return await executor.run(effect);
    } catch (e) {
      if (!(e instanceof UpdateError)) this.#log.error({ update: effect.do }, 'update step failed');
      return { type: 'failed', ...(e instanceof UpdateError ? { code: e.code, message: e.message } : {}) };
    }
  }

  /** The machine's stop as a result; an `applied` one raises the floors and the schema epoch. */
  async #stopResult(reply: Extract<Effect, { do: 'stop' }>['reply']): Promise<UpdateResult> {
    const at = (reply.step ?? null) as LifecycleStep | null;
    if (reply.outcome === 'applied' && reply.record?.floors) {
      await this.store.raiseFloors(reply.record.floors);
      await this.store.setSchemaEpoch(reply.record.toSchemaEpoch);
    }
    return {
      outcome: reply.outcome,
      step: at,
      code: reply.code ?? null,
      message: reply.message ?? null,
      passed:
        reply.outcome === 'no-update'
          ? []
          : reply.outcome === 'refused' || reply.outcome === 'dry-run'
            ? passedBefore(at)
            : passedBefore('settle'),
      record: reply.record ?? null,
    };
  }

  /**
   * After an engine promote: stop here when this process must give way to another program (its
   * pointer moved, or the orchestrator must swap the image) and the machine would now fly the
   * canary or report the ramp; the program that runs next settles the record.
   */
  #restartsHere(
    effect: Exclude<Effect, { do: 'stop' }>,
    event: UpdateEvent,
    next: Step,
  ): effect is Extract<Effect, { do: 'promote' }> {
    const container = this.#config.update?.deployer === 'container';
    return (
      effect.do === 'promote' &&
      effect.component === 'engine' &&
      event.type === 'promoted' &&
      (this.#moved || (container && effect.percentage === 100)) &&
      (next.effect.do === 'canary' || (next.effect.do === 'stop' && next.effect.reply.outcome === 'ramping'))
    );
  }

  #restartingResult(version: string, record: UpdateRecord): UpdateResult {
    const u = this.#config.update;
    const container = u?.deployer === 'container';
    const result: UpdateResult = {
      outcome: 'restarting',
      step: 'promote',
      code: null,
      message: container
        ? `release ${version} verified; the orchestrator must now run it`
        : `the engine restarts into ${version}; GET /admin/update/status follows the settle`,
      passed: passedBefore('settle'),
      record,
    };
    if (container && u?.image !== undefined)
      result.orchestrator = {
        message: `set the image of the engine deployment to ${u.image}:${version} and restart it`,
      };
    return result;
  }

  /** Marks the result and schedules the restart when this drive moved the engine's pointer. */
  #withRestart(result: UpdateResult): UpdateResult {
    if (this.#moved) {
      result.restart = true;
      this.#scheduleRestart();
    }
    return result;
  }

  /** Restarts after the reply is out (the route answers first; then the hook closes the app). */
  #scheduleRestart(): void {
    if (this.#restartScheduled) return;
    if (this.#restart === undefined) {
      this.#log.warn({ update: 'restart' }, 'the engine pointer moved; restart the engine to run it');
      return;
    }
    this.#restartScheduled = true;
    this.#log.info({ update: 'restart' }, 'engine restarting into the promoted program');
    setTimeout(() => {
      Promise.resolve(this.#restart!()).catch(() => {
        this.#log.error({ update: 'restart' }, 'engine restart failed');
      });
    }, 250).unref();
  }

  /** An executor for settle and rollback: deploys and canary flights (no channel, no download). */
  #deployExecutor(): UpdateExecutor {
    const deployers = this.#deployers();
    const container = this.#config.update?.deployer === 'container';
    return {
      persist: (r) => this.store.putRecord(r),
      run: async (effect) => {
        if (effect.do === 'rollback-deploy' || effect.do === 'promote') {
          const d = deployers[effect.component];
          if (!d)
            throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `no deployer for ${effect.component}`);
          // The engine cannot swap its own image: a container rollback needs the operator.
          if (container && effect.component === 'engine' && effect.do === 'rollback-deploy')
            throw new UpdateError(
              'ERR_UPDATE_DEPLOY',
              `set the image of the engine deployment to ${this.#config.update?.image ?? 'the image'}:${effect.version ?? 'the prior version'} and restart it`,
            );
          await d.promote(effect.version);
          return effect.do === 'promote'
            ? { type: 'promoted', component: effect.component }
            : { type: 'rolled-back', component: effect.component };
        }
        if (effect.do === 'canary') {
          if (effect.afterMs > 0) await this.#wait(effect.afterMs);
          return { type: 'canary', verdict: await this.#flight(effect.check) };
        }
        throw new UpdateError('ERR_UPDATE_INVALID_TRANSITION', `${effect.do} is not available here`);
      },
      now: () => this.#iso(),
    };
  }

  /** `POST /admin/update/settle`. Throws UpdateError (ramp-shaped record, nothing pending). */
  settle(verdict: 'alive' | 'dead' | 'undecided'): Promise<UpdateResult> {
    return this.#exclusive(async () => {
      const step = settleRecord(await this.store.record(), verdict, this.#iso());
      return this.#drive(step, this.#deployExecutor());
    });
  }

  /** `POST /admin/update/ramp/settle`. Throws UpdateError (apply-shaped record, nothing pending). */
  settleRamp(verdict: 'alive' | 'dead'): Promise<UpdateResult> {
    return this.#exclusive(async () => {
      const step = settleRamp(await this.store.record(), verdict, this.#iso());
      return this.#drive(step, this.#deployExecutor());
    });
  }

  /**
   * `POST /admin/update/rollback`, all of the record's components or one. Throws UpdateError: no
   * record, nothing promoted yet (an uploaded release is not live: there is nothing to go back
   * from), no earlier version recorded, or the engine crossing a schema epoch.
   */
  rollback(component?: ComponentName): Promise<UpdateResult> {
    return this.#exclusive(async () => {
      const record = await this.store.record();
      if (record !== null && record.status === 'pending' && record.phase === 'uploading')
        throw new UpdateError(
          'ERR_UPDATE_NO_ROLLBACK_TARGET',
          'nothing was promoted: the uploaded release is not live',
        );
      const step = startRollback(record, this.#iso(), component);
      return this.#drive(step, this.#deployExecutor());
    });
  }

  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const counted = async () => {
      this.#busy++;
      try {
        return await fn();
      } finally {
        this.#busy--;
      }
    };
    const run = this.#serial.then(counted, counted);
    this.#serial = run.catch(() => undefined);
    return run;
  }

  /**
   * At start (plugins/updates.ts, once the engine listens): clears the launcher's boot counter
   * when this program is the promoted release, settles a promoted update whose program is not
   * running (the launcher could not enter it: dead), arms the settle timer for one that is, and
   * lines this replica up with a ramp. Never throws; returns what it did, for the log and tests.
   */
  async resumeAfterStart(): Promise<'none' | 'settle-scheduled' | UpdateResult> {
    if (this.#config.update?.deployer !== 'container') {
      const pointer = currentRelease(this.#config.dataDir);
      if (pointer === this.engineVersion) clearBootMark(this.#config.dataDir);
    }
    try {
      const record = await this.store.record();
      if (record?.status === 'pending' && record.shape === 'apply') {
        if (!['settling', 'awaiting-canary'].includes(record.phase)) return 'none';
        const target = record.to.engine;
        const pointer =
          this.#config.update?.deployer === 'container' ? null : currentRelease(this.#config.dataDir);
        if (target !== undefined && target !== this.engineVersion && pointer === target) {
          this.#log.error(
            { update: 'not-running', version: target },
            'the promoted engine did not start; rolling back',
          );
          return (await this.#exclusive(() => this.#settleWith('dead', record.id))) ?? 'none';
        }
        if (target === undefined || target === this.engineVersion) {
          const delay = (this.#config.update?.settleDelaySeconds ?? 30) * 1000;
          this.#settleTimer = setTimeout(() => {
            this.#settleTimer = null;
            void this.settleByCanary().catch(() => undefined);
          }, delay);
          this.#settleTimer.unref();
          return 'settle-scheduled';
        }
        return 'none';
      }
      const moved = await this.reconcileReplica();
      return moved ?? 'none';
    } catch (e) {
      this.#log.error({ update: 'resume', code: (e as { code?: string }).code }, 'update resume failed');
      return 'none';
    }
  }

  /**
   * Settles a promoted update that awaits its verdict with the canary: `verdict` when a flight
   * just decided one (the canary's listener), otherwise a flight now. A first verdict that is
   * undecided is retried as the specification says (two more flights and one self-check, about
   * three seconds). Returns null when nothing awaited a verdict.
   */
  async settleByCanary(verdict?: CanaryVerdict): Promise<UpdateResult | null> {
    if (this.#busy > 0) return null;
    return this.#exclusive(async () => {
      const record = await this.store.record();
      if (
        record === null ||
        record.status !== 'pending' ||
        record.shape !== 'apply' ||
        !['settling', 'awaiting-canary'].includes(record.phase) ||
        (record.to.engine !== undefined && record.to.engine !== this.engineVersion)
      )
        return null;
      if (this.#settleTimer !== null) {
        clearTimeout(this.#settleTimer);
        this.#settleTimer = null;
      }
      let v: CanaryVerdict = verdict ?? (await this.#flight('flight'));
      if (record.phase === 'settling')
        for (const retry of CANARY_RETRY_SCHEDULE) {
          if (v !== 'undecided') break;
          await this.#wait(retry.afterMs);
          v = await this.#flight(retry.check);
        }
      return this.#settleWith(v, record.id);
    });
  }

  /** Settles the pending record `id` with `verdict` (inside #exclusive). */
  async #settleWith(verdict: CanaryVerdict, id: string): Promise<UpdateResult | null> {
    const record = await this.store.record();
    if (record === null || record.id !== id || record.status !== 'pending') return null;
    const result = await this.#drive(settleRecord(record, verdict, this.#iso()), this.#deployExecutor());
    this.#log.info(
      { update: 'settled', verdict, outcome: result.outcome, id },
      `update ${id} settled by the canary: ${result.outcome}`,
    );
    this.onSettled?.(verdict, result);
    return result;
  }

  /** Called after an automatic settle (plugins/updates.ts writes its audit row). */
  onSettled: ((verdict: CanaryVerdict, result: UpdateResult) => void) | undefined;

  /**
   * The version this replica should run under the latest ramp-shaped record, or null when the
   * record does not concern it (no record, an apply-shaped one, a container deployer).
   */
  async #rampTarget(): Promise<{ version: string; record: UpdateRecord } | null> {
    if (this.#config.update?.deployer === 'container') return null;
    const record = await this.store.record();
    if (record === null || record.shape !== 'ramp' || record.to.engine === undefined) return null;
    const to = record.to.engine;
    const from = record.from.engine ?? this.#base;
    if (record.status === 'pending' && record.phase === 'ramping')
      return { version: inRamp(this.#instanceId, to, record.ramp?.percentage ?? 0) ? to : from, record };
    if (record.status === 'settled' && record.outcome === 'applied') return { version: to, record };
    if (record.status === 'settled') return { version: from, record };
    return null;
  }

  /**
   * Lines this replica up with the latest ramp (module comment): when it runs another version
   * than it should, the pointer moves (downloading and uploading the release first when this
   * replica has not got it, against the record's own channel digest) and the engine restarts.
   * Returns null when nothing had to move.
   */
  async reconcileReplica(): Promise<UpdateResult | null> {
    if (this.#busy > 0) return null;
    return this.#exclusive(async () => {
      const want = await this.#rampTarget();
      if (want === null || want.version === this.engineVersion) return null;
      const d = this.#engineDirectory();
      const version = want.version;
      if (version !== this.#base && !existsSync(join(d.releasesDir, version, 'release.json'))) {
        const channel = await this.fetch();
        if (
          channel.digest !== want.record.channel.digest ||
          channel.document.components.engine?.version !== version
        )
          throw new UpdateError('ERR_UPDATE_PROMOTE', 'the channel no longer offers the ramped release');
        const a = await downloadArtefact(channel, 'engine', {
          dir: join(this.#config.dataDir, 'update-downloads'),
          ...(this.#config.update?.ca !== undefined ? { ca: this.#config.update.ca } : {}),
        });
        await d.upload(version, a.path);
      }
      this.#moved = false;
      await this.#deployers().engine!.promote(version);
      this.#log.info({ update: 'ramp-follow', version }, `replica follows the ramp to ${version}`);
      const result: UpdateResult = {
        outcome: 'restarting',
        step: 'promote',
        code: null,
        message: `this replica moves to ${version}`,
        passed: [],
        record: want.record,
      };
      if (this.#moved) {
        result.restart = true;
        this.#scheduleRestart();
      }
      return result;
    });
  }

  /** Stops the settle timer (app close). */
  close(): void {
    if (this.#settleTimer !== null) clearTimeout(this.#settleTimer);
    this.#settleTimer = null;
  }
}
