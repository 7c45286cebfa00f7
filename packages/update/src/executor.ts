/**
 * An {@link UpdateExecutor} built from this package's own parts: artefacts come from
 * {@link downloadArtefact} against one verified channel, uploads, read-backs, promotes and
 * rollbacks go to one {@link Deployer} per component, and the canary is the caller's. The engine
 * adds its audit rows and the deploy-token check around it; tests drive it on temp directories.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ComponentName, VerifiedChannel } from './channel.ts';
import type { Deployer, DeployNote } from './deploy.ts';
import { UpdateError } from './errors.ts';
import { type DownloadOptions, downloadArtefact } from './fetch.ts';
import type { CanaryVerdict, UpdateEvent, UpdateExecutor } from './lifecycle.ts';
import type { UpdateRecord } from './record.ts';

export interface ExecutorOptions {
  channel: VerifiedChannel;
  deployers: Partial<Record<ComponentName, Deployer>>;
  download: DownloadOptions;
  persist(record: UpdateRecord): Promise<void>;
  /** One canary flight, or the self-check; resolves to its verdict. */
  canary(check: 'flight' | 'self-check'): Promise<CanaryVerdict>;
  /** Moves `percentage` of replicas to `version` (ramp); without it a partial promote fails. */
  ramp?(component: ComponentName, version: string, percentage: number): Promise<void>;
  /** Waits between canary retries; default a real timer. */
  wait?(ms: number): Promise<void>;
  now?(): string;
  /** Receives what each deployer step reports (container mode: what the orchestrator must do). */
  note?(component: ComponentName, note: DeployNote): void;
}

/** Builds the executor; each method throws an UpdateError that {@link driveUpdate} reports. */
export function createUpdateExecutor(options: ExecutorOptions): UpdateExecutor {
  const paths = new Map<ComponentName, string>();
  const deployer = (c: ComponentName): Deployer => {
    const d = options.deployers[c];
    if (!d) throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `no deployer for ${c}`);
    return d;
  };
  const note = (c: ComponentName, n: DeployNote) => options.note?.(c, n);
  const exec: UpdateExecutor = {
    persist: (record) => options.persist(record),
    async run(effect): Promise<UpdateEvent> {
      switch (effect.do) {
        case 'verify-artefact': {
          const a = await downloadArtefact(options.channel, effect.component, options.download);
          paths.set(effect.component, a.path);
          return {
            type: 'artefact',
            component: a.component,
            sha384: a.sha384,
            channelDigest: a.channelDigest,
          };
        }
        case 'read-live': {
          const versions: Partial<Record<ComponentName, string | null>> = {};
          for (const [c, d] of Object.entries(options.deployers) as [ComponentName, Deployer][])
            versions[c] = await d.live();
          return { type: 'live', versions };
        }
        case 'upload': {
          const path = paths.get(effect.component);
          if (path === undefined)
            throw new UpdateError('ERR_UPDATE_UPLOAD', 'the artefact was not verified first');
          note(effect.component, await deployer(effect.component).upload(effect.version, path));
          return { type: 'uploaded', component: effect.component };
        }
        case 'read-back':
          return {
            type: 'read-back',
            component: effect.component,
            sha384: await deployer(effect.component).readBack(effect.version),
          };
        case 'promote':
          if (effect.percentage < 100) {
            if (!options.ramp) throw new UpdateError('ERR_UPDATE_PROMOTE', 'no ramp is configured');
            await options.ramp(effect.component, effect.version, effect.percentage);
          } else note(effect.component, await deployer(effect.component).promote(effect.version));
          return { type: 'promoted', component: effect.component };
        case 'canary':
          if (effect.afterMs > 0) await (options.wait ?? ((ms: number) => sleep(ms)))(effect.afterMs);
          return { type: 'canary', verdict: await options.canary(effect.check) };
        case 'rollback-deploy':
          note(effect.component, await deployer(effect.component).promote(effect.version));
          return { type: 'rolled-back', component: effect.component };
      }
    },
  };
  if (options.now) exec.now = options.now;
  return exec;
}
