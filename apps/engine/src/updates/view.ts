/**
 * `GET /admin/updates`'s view of a verified channel (docs/updates.md "Engine routes"): what the
 * channel offers, and per component the guards' verdict for a one-click apply. Pure: the service
 * fetches, this describes.
 */
import {
  type ComponentName,
  compareVersions,
  runGuards,
  type UpdateErrorCode,
  type VerifiedChannel,
} from '@coffer/update';
import type { AcceptedChannel, Floors } from './store.ts';

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

type Running = UpdatesView['running'];

/** The verified part of the view: channel, recommended release, components and their verdicts. */
export function verifiedView(
  channel: VerifiedChannel,
  running: Running,
  floors: Floors,
  schemaEpoch: number,
): Required<
  Pick<UpdatesView, 'channel' | 'recommended' | 'updateAvailable' | 'compatible' | 'components'>
> & {
  verified: true;
} {
  const doc = channel.document;
  const r = doc.recommended;
  const components = (Object.keys(doc.components) as ComponentName[]).map((c) =>
    componentView(c, doc.components[c]!.version, running, floors[c] ?? null, schemaEpoch, r),
  );
  const min = r.minEngineVersion ?? null;
  return {
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

function componentView(
  component: ComponentName,
  target: string,
  running: Running,
  floor: string | null,
  schemaEpoch: number,
  release: VerifiedChannel['document']['recommended'],
): ComponentView {
  const run = component === 'engine' ? running.engine : running.console;
  const verdict = runGuards({
    target,
    running: run,
    runningEngine: running.engine,
    floor,
    runningSchemaEpoch: schemaEpoch,
    release,
    path: 'one-click',
  });
  const newerThanRunning = run === null || compareVersions(target, run) === 1;
  const aboveFloor = floor === null || (compareVersions(target, floor) ?? -1) >= 0;
  return {
    component,
    running: run,
    available: target,
    floor,
    newer: newerThanRunning && aboveFloor,
    verdict: verdict.ok ? 'update' : verdict.step === 'no-update' ? 'current' : 'refused',
    code: verdict.ok ? null : verdict.code,
  };
}
