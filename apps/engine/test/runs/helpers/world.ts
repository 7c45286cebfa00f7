/**
 * A run world for standalone tests of the run machinery: a real SQLite (or PostgreSQL) state
 * store, real engine keys, real filesystem destinations in temp dirs, a source directory, and a
 * RunService over them with an injectable clock. No HTTP (the routes have their own tests).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateRecipient, generateSigner } from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { openState, type State } from '@coffer/state';
import { tempDir } from '@coffer/testkit';
import { FaultRegistry } from '../../../src/runs/faults.ts';
import { createRunService, type RunService, type RunServiceOptions } from '../../../src/runs/service.ts';

type T = { teardown(fn: () => void | Promise<void>): void };

export interface World {
  state: State;
  service: RunService;
  faults: FaultRegistry;
  destinations: Map<string, ObjectStore>;
  destDirs: Record<string, string>;
  sourceDir: string;
  keys: {
    signer: { secretKey: Uint8Array; publicKey: Uint8Array };
    operational: { secretKey: Uint8Array; publicKey: Uint8Array };
    breakGlass: { publicKey: Uint8Array } | null;
  };
  breakGlassSecret: Uint8Array;
  clock: { now: Date };
  logs: Record<string, unknown>[];
  addJob(job: Record<string, unknown>): Promise<void>;
  /** Triggers, waits until the run settles, returns the stored run. */
  runNow(jobId: string): Promise<import('@coffer/state').RunRecord>;
}

export function writeTree(dir: string, files: Record<string, string | Uint8Array>): void {
  for (const [name, body] of Object.entries(files)) {
    const p = join(dir, name);
    mkdirSync(join(p, '..'), { recursive: true });
    writeFileSync(p, body);
  }
}

export async function makeWorld(
  t: T,
  options: {
    destinations?: string[];
    breakGlass?: boolean;
    files?: Record<string, string | Uint8Array>;
    service?: Partial<RunServiceOptions>;
    stateUrl?: string;
  } = {},
): Promise<World> {
  const dataDir = tempDir(t, 'coffer-runs-');
  const sourceDir = join(dataDir, 'source');
  mkdirSync(sourceDir, { recursive: true });
  writeTree(
    sourceDir,
    options.files ?? {
      'a.txt': 'alpha\n',
      'dir/b.txt': 'bravo\n',
      'dir/c.bin': new Uint8Array(70_000).fill(7),
    },
  );
  const clock = { now: new Date() };
  const state = await openState({
    dataDir,
    now: () => clock.now,
    ...(options.stateUrl ? { url: options.stateUrl } : {}),
  });
  t.teardown(() => state.close());
  const destinations = new Map<string, ObjectStore>();
  const destDirs: Record<string, string> = {};
  for (const id of options.destinations ?? ['default']) {
    destDirs[id] = join(dataDir, `dest-${id}`);
    mkdirSync(destDirs[id], { recursive: true });
    destinations.set(id, createFsStore({ root: destDirs[id] }));
  }
  const signer = generateSigner();
  const op = generateRecipient();
  const bg = generateRecipient();
  const keys = {
    signer,
    operational: op,
    breakGlass: options.breakGlass === false ? null : { publicKey: bg.publicKey },
  };
  const logs: Record<string, unknown>[] = [];
  const log = {
    info: (o: Record<string, unknown>, msg: string) => logs.push({ level: 'info', ...o, msg }),
    warn: (o: Record<string, unknown>, msg: string) => logs.push({ level: 'warn', ...o, msg }),
    error: (o: Record<string, unknown>, msg: string) => logs.push({ level: 'error', ...o, msg }),
  };
  const faults = new FaultRegistry();
  const service = createRunService({
    state,
    keys,
    destinations,
    log,
    dataDir,
    faults,
    now: () => clock.now,
    executor: { checkpointIntervalMs: 0, workers: 0 },
    ...options.service,
  });
  t.teardown(() => service.stop());
  const world: World = {
    state,
    service,
    faults,
    destinations,
    destDirs,
    sourceDir,
    keys,
    breakGlassSecret: bg.secretKey,
    clock,
    logs,
    async addJob(job) {
      await state.jobs.upsert({
        cadenceSeconds: 3600,
        enabled: true,
        source: { type: 'files', path: sourceDir },
        destinations: [...destinations.keys()],
        ...job,
      } as unknown as { id: string });
    },
    async runNow(jobId) {
      const r = await service.trigger(jobId);
      if (r.kind !== 'started') throw new Error(`trigger: ${r.kind}`);
      await service.idle();
      const run = await state.runs.get(r.runId);
      if (!run) throw new Error('run missing');
      return run;
    },
  };
  return world;
}
