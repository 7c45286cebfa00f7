/**
 * `UpdateService`: the engine's side of the update lifecycle (docs/updates.md "Engine routes"),
 * over @coffer/update's pure machine and the persisted state in store.ts. It fetches and verifies
 * the configured channel (the pinned signer, expiry, the persisted sequence), reports what it
 * offers, and runs apply, ramp, settle and rollback through the machine, persisting each record
 * the machine hands back before the effect that follows it.
 *
 * What this engine version does not do yet: promote. A live apply or ramp goes as far as the
 * inert upload and its read-back gate (releases under `<data dir>/releases/<version>/`, the
 * console's under `<data dir>/console-releases/<version>/`) and stops before the promote step with
 * outcome `uploaded`; nothing live changes and the record stays `pending` / `uploading` (a new
 * apply replaces it). Switching the `current` pointer, re-executing the engine into it, and the
 * canary flight that settles a promote are the remaining part of issue #19. `settle`, `ramp/settle`
 * and `rollback` run the machine over a persisted record (their refusals are complete; a promote
 * they would need stops the same way).
 *
 * Security-relevant behaviour: the channel is trusted only through the pinned signer key file
 * (both signature halves); the accepted sequence and digest are persisted so a replayed or lowered
 * document is refused across restarts; the floor is read from the store on every check and only
 * raised; artefacts are downloaded only against the one verified document; a live step needs the
 * deploy token, checked by the route before this service is called.
 */
import { join } from 'node:path';
import {
  advance,
  type ChannelTrust,
  type ComponentName,
  ContainerDeployer,
  compareVersions,
  createUpdateExecutor,
  type Deployer,
  DirectoryDeployer,
  type Effect,
  fetchChannel,
  isUpdateError,
  LIFECYCLE_STEPS,
  type LifecycleStep,
  runGuards,
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
import type { State } from '../state/index.ts';
import { ENGINE_VERSION } from '../version.ts';
import { type AcceptedChannel, type Floors, UpdateStore } from './store.ts';

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
    | 'ramping';
  step: EngineStep | null;
  code: UpdateErrorCode | null;
  message: string | null;
  /** Lifecycle steps passed before the one that stopped it, in order. */
  passed: LifecycleStep[];
  record: UpdateRecord | null;
  /** Container mode: what the orchestrator must do once the release is uploaded. */
  orchestrator?: { message: string };
}

export interface ComponentView {
  component: ComponentName;
  running: string | null;
  available: string;
  floor: string | null;
  /** The channel version is newer than the running one and not below the floor. */
  newer: boolean;
  /** The guards' verdict for a one-click apply: `update`, `current`, or `refused` with its code. */
  verdict: 'update' | 'current' | 'refused';
  code: UpdateErrorCode | null;
}

export interface UpdatesView {
  configured: boolean;
  verified: boolean;
  running: { engine: string; console: string | null };
  floors: Floors;
  schemaEpoch: number;
  lastAccepted: AcceptedChannel | null;
  /** When verification failed: the UpdateError code and its message. */
  code?: UpdateErrorCode;
  error?: string;
  channel?: { name: string; sequence: number; digest: string; issuedAt: string; expiresAt: string };
  recommended?: {
    version: string;
    risk: string;
    requiredSteps: string[];
    schemaEpoch: number;
    migration: boolean;
    minEngineVersion: string | null;
  };
  updateAvailable?: boolean;
  compatible?: boolean;
  components?: ComponentView[];
}

export interface UpdateServiceOptions {
  state: State;
  config: EngineConfig;
  log: FastifyBaseLogger;
  /** Test-only: the version this engine reports as running (default ENGINE_VERSION). */
  engineVersion?: string;
  /** Test-only: the clock (ms since the epoch). */
  now?: () => number;
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
  #checking: Promise<UpdatesView> | null = null;

  constructor(options: UpdateServiceOptions) {
    this.store = new UpdateStore(options.state);
    this.engineVersion = options.engineVersion ?? ENGINE_VERSION;
    this.#config = options.config;
    this.#log = options.log;
    this.#now = options.now ?? Date.now;
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

  #deployers(): Partial<Record<ComponentName, Deployer>> {
    const u = this.#config.update;
    const running = this.engineVersion;
    let engine: Deployer;
    if (u?.deployer === 'container') engine = new ContainerDeployer({ image: u.image ?? 'unset', running });
    else {
      const d = new DirectoryDeployer({ dataDir: this.#config.dataDir });
      // The running process is the live engine until promote and re-exec exist: the pointer, when
      // set, names a release; without it the live version is the one running.
      engine = {
        mode: d.mode,
        live: async () => (await d.live()) ?? running,
        upload: (v, p) => d.upload(v, p),
        readBack: (v) => d.readBack(v),
        promote: (v) => d.promote(v),
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
    const doc = channel.document;
    const r = doc.recommended;
    const components: ComponentView[] = [];
    for (const c of Object.keys(doc.components) as ComponentName[]) {
      const target = doc.components[c]!.version;
      const run = c === 'engine' ? running.engine : running.console;
      const floor = floors[c] ?? null;
      const verdict = runGuards({
        target,
        running: run,
        runningEngine: running.engine,
        floor,
        runningSchemaEpoch: schemaEpoch,
        release: r,
        path: 'one-click',
      });
      const newerThanRunning = run === null || compareVersions(target, run) === 1;
      const aboveFloor = floor === null || (compareVersions(target, floor) ?? -1) >= 0;
      components.push({
        component: c,
        running: run,
        available: target,
        floor,
        newer: newerThanRunning && aboveFloor,
        verdict: verdict.ok ? 'update' : verdict.step === 'no-update' ? 'current' : 'refused',
        code: verdict.ok ? null : verdict.code,
      });
    }
    const min = r.minEngineVersion ?? null;
    return {
      ...base,
      verified: true,
      channel: {
        name: doc.channel,
        sequence: doc.sequence,
        digest: channel.digest,
        issuedAt: doc.issuedAt,
        expiresAt: doc.expiresAt,
      },
      recommended: {
        version: r.version,
        risk: r.risk,
        requiredSteps: r.requiredSteps,
        schemaEpoch: r.schemaEpoch,
        migration: r.migration,
        minEngineVersion: min,
      },
      updateAvailable: components.find((c) => c.component === 'engine')?.newer ?? false,
      compatible: min === null || (compareVersions(running.engine, min) ?? -1) >= 0,
      components,
    };
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
      promote: 'unavailable' as const,
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
    const first = ramp ? startRamp({ ...common, percentage: input.percentage! }) : startApply(common);
    const executor = createUpdateExecutor({
      channel,
      deployers: this.#deployers(),
      download: {
        dir: join(this.#config.dataDir, 'update-downloads'),
        ...(this.#config.update?.ca !== undefined ? { ca: this.#config.update.ca } : {}),
      },
      persist: (r) => this.store.putRecord(r),
      canary: async () => 'undecided',
      now: () => this.#iso(),
    });
    return this.#drive(first, executor);
  }

  /**
   * Runs the machine to its stop, persisting each record before the effect after it. A promote
   * effect stops the drive with `uploaded` (promote is not available yet, module comment): the
   * record is persisted as it stands after the read-back gate, still `pending` / `uploading`.
   */
  async #drive(first: Step, executor: UpdateExecutor): Promise<UpdateResult> {
    let step = first;
    for (;;) {
      if (step.effect.do === 'promote') {
        const record: UpdateRecord = { ...step.state.record, phase: 'uploading', updatedAt: this.#iso() };
        await this.store.putRecord(record);
        const result: UpdateResult = {
          outcome: 'uploaded',
          step: 'promote',
          code: null,
          message: 'release uploaded inert and read back; promote is not available in this engine version',
          passed: passedBefore('promote'),
          record,
        };
        if (this.#config.update?.deployer === 'container' && this.#config.update.image !== undefined)
          result.orchestrator = {
            message: `set the image of the engine deployment to ${this.#config.update.image}:${record.to.engine} and restart it`,
          };
        return result;
      }
      if (step.persist) await executor.persist(step.persist);
      if (step.effect.do === 'stop') {
        const reply = step.effect.reply;
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
      let event: UpdateEvent;
      try {
        event = await executor.run(step.effect as Exclude<Effect, { do: 'stop' }>);
      } catch (e) {
        event = {
          type: 'failed',
          ...(e instanceof UpdateError ? { code: e.code, message: e.message } : {}),
        };
        if (!(e instanceof UpdateError)) this.#log.error({ update: step.effect.do }, 'update step failed');
      }
      step = advance(step.state, event, this.#iso());
    }
  }

  /** An executor for settle and rollback: deploys only (no channel, no download, no canary). */
  #deployExecutor(): UpdateExecutor {
    const deployers = this.#deployers();
    return {
      persist: (r) => this.store.putRecord(r),
      run: async (effect) => {
        if (effect.do === 'rollback-deploy') {
          const d = deployers[effect.component];
          if (!d)
            throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `no deployer for ${effect.component}`);
          await d.promote(effect.version);
          return { type: 'rolled-back', component: effect.component };
        }
        if (effect.do === 'canary') return { type: 'canary', verdict: 'undecided' };
        throw new UpdateError('ERR_UPDATE_INVALID_TRANSITION', `${effect.do} is not available here`);
      },
      now: () => this.#iso(),
    };
  }

  /** `POST /admin/update/settle`. Throws UpdateError (ramp-shaped record, nothing pending). */
  async settle(verdict: 'alive' | 'dead' | 'undecided'): Promise<UpdateResult> {
    const step = settleRecord(await this.store.record(), verdict, this.#iso());
    return this.#drive(step, this.#deployExecutor());
  }

  /** `POST /admin/update/ramp/settle`. Throws UpdateError (apply-shaped record, nothing pending). */
  async settleRamp(verdict: 'alive' | 'dead'): Promise<UpdateResult> {
    const step = settleRamp(await this.store.record(), verdict, this.#iso());
    return this.#drive(step, this.#deployExecutor());
  }

  /**
   * `POST /admin/update/rollback`, all of the record's components or one. Throws UpdateError: no
   * record, nothing promoted yet (an uploaded release is not live: there is nothing to go back
   * from), no earlier version recorded, or the engine crossing a schema epoch.
   */
  async rollback(component?: ComponentName): Promise<UpdateResult> {
    const record = await this.store.record();
    if (record !== null && record.status === 'pending' && record.phase === 'uploading')
      throw new UpdateError(
        'ERR_UPDATE_NO_ROLLBACK_TARGET',
        'nothing was promoted: the uploaded release is not live',
      );
    const step = startRollback(record, this.#iso(), component);
    return this.#drive(step, this.#deployExecutor());
  }
}
