/**
 * Shared set-up of the restore end-to-end tests of the sqlite, redis and s3 sources: an engine on
 * loopback with restore roots, a job created and run over HTTP with the admin token, a dry run, an
 * apply polled to its receipt. Every call goes through the real HTTP server.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import type { BuildAppOptions } from '../../src/app.ts';
import { bearer, http, type Reply, type Started, startEngine } from '../helpers/engine.ts';

type T = Parameters<typeof startEngine>[0];

/**
 * Writes an ENGINE_CONNECTIONS_FILE document into a temporary directory and returns its path
 * (redis and s3 jobs reference connections only; src/connections).
 */
export function connectionsFile(t: T, doc: Record<string, unknown>): string {
  const path = join(tempDir(t, 'coffer-connections-'), 'connections.json');
  writeFileSync(path, JSON.stringify(doc, null, 2));
  return path;
}

export interface RestoreWorld {
  e: Started;
  /** The test the world belongs to (its temporary directories are removed with it). */
  t: T;
  /** The one restore root (ENGINE_RESTORE_ROOTS). */
  roots: string;
  post(path: string, body: unknown, who?: Record<string, string>): Promise<Reply>;
  get(path: string, who?: Record<string, string>): Promise<Reply>;
  /** Creates (or replaces) the job, triggers a run, waits until it settles; returns the ok run's id. */
  backUp(id: string, source: Record<string, unknown>): Promise<string>;
  /** A dry run; fails the caller's expectations through the reply, not here. */
  dryRun(body: Record<string, unknown>): Promise<Reply>;
  /** An apply (`confirm: true`) answered 202, polled to its end; returns the poll view. */
  // biome-ignore lint/suspicious/noExplicitAny: the poll view is read field by field by the tests
  apply(body: Record<string, unknown>): Promise<any>;
  /** A manual drill of the job's latest ok run, waited for; returns its evidence. */
  // biome-ignore lint/suspicious/noExplicitAny: evidence is read field by field by the tests
  drill(job: string): Promise<any>;
}

export async function restoreWorld(
  t: T,
  env: Record<string, string> = {},
  options: Omit<BuildAppOptions, 'config'> = {},
): Promise<RestoreWorld> {
  const dir = tempDir(t, 'coffer-restore-world-');
  const roots = join(dir, 'roots');
  mkdirSync(roots);
  // A break-glass recipient, so the engine is fully configured and runs seal.
  writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const env0 = { ENGINE_RESTORE_ROOTS: roots, ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.pub') };
  const e = await startEngine(
    t,
    { ...env0, ...env },
    {
      rateLimit: { max: 1000, windowSeconds: 60 },
      ...options,
    },
  );
  const post = (path: string, body: unknown, who: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers: who, body });
  const get = (path: string, who: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers: who });
  async function poll(applyId: string) {
    for (let i = 0; i < 1200; i++) {
      const r = (await get(`/restore/applies?id=${applyId}`)).json();
      if (r.status !== 'running') return r;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error('apply did not finish');
  }
  return {
    e,
    t,
    roots,
    post,
    get,
    async backUp(id, source) {
      const upsert = await post('/jobs', { id, cadenceSeconds: 3600, source });
      if (upsert.status !== 200) throw new Error(`job upsert: ${upsert.text}`);
      const trig = await post('/trigger', { id });
      if (trig.status !== 200) throw new Error(`trigger: ${trig.text}`);
      const runId = trig.json().runId as string;
      await e.app.runs.idle();
      const run = await e.app.state.runs.get(runId);
      if (run?.status !== 'ok') throw new Error(`run ${runId} ended ${run?.status}: ${run?.reason}`);
      return runId;
    },
    dryRun: (body) => post('/restore', body),
    async apply(body) {
      const r = await post('/restore', { ...body, confirm: true });
      if (r.status !== 202) throw new Error(`apply: ${r.status} ${r.text}`);
      return poll(r.json().applyId);
    },
    async drill(job) {
      const r = await post('/drill/run', { job });
      if (r.status !== 202) throw new Error(`drill: ${r.status} ${r.text}`);
      for (let i = 0; i < 1200; i++) {
        await new Promise((res) => setTimeout(res, 25));
        if ((await get('/attest/session/status')).json().active) continue;
        return (await get(`/drill-evidence?job=${job}`)).json().evidence[0];
      }
      throw new Error('drill did not finish');
    },
  };
}

/**
 * An incremental job (created over HTTP) with `keepLast: 1` and two ok runs: the first over
 * `files`, the second after `change` was written over them. Returns the newer run's id.
 */
export async function incrementalJob(
  w: RestoreWorld,
  job: string,
  files: Record<string, string | Uint8Array>,
  change: Record<string, string | Uint8Array>,
): Promise<string> {
  const src = join(tempDir(w.t, `coffer-incremental-${job}-`), 'tree');
  mkdirSync(src, { recursive: true });
  for (const [name, body] of Object.entries(files)) writeFileSync(join(src, name), body);
  const source = { type: 'files', path: src };
  const upsert = await w.post('/jobs', { id: job, cadenceSeconds: 3600, source, incremental: true });
  if (upsert.status !== 200) throw new Error(`job upsert: ${upsert.text}`);
  const run = async () => {
    const trig = await w.post('/trigger', { id: job });
    if (trig.status !== 200) throw new Error(`trigger: ${trig.text}`);
    await w.e.app.runs.idle();
    const rec = await w.e.app.state.runs.get(trig.json().runId as string);
    if (rec?.status !== 'ok') throw new Error(`run ended ${rec?.status}: ${rec?.reason}`);
    return rec.id;
  };
  await run();
  for (const [name, body] of Object.entries(change)) writeFileSync(join(src, name), body);
  const newer = await run();
  const rec = await w.e.app.state.jobs.get(job);
  await w.e.app.state.jobs.upsert({ ...rec!.config, id: job, retention: { keepLast: 1 } } as unknown as {
    id: string;
  });
  return newer;
}

/**
 * Holds every read (`get`, `getStream`) of a key `held` accepts until the returned function is
 * called (which also puts the store's own methods back), so an apply or a drill reading those
 * objects is surely still in progress meanwhile.
 */
export function holdReads(store: ObjectStore, held: (key: string) => boolean): () => void {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const { get, getStream } = store;
  store.get = async (key, ...rest) => {
    if (held(key)) await gate;
    return get.call(store, key, ...rest);
  };
  store.getStream = async (key, ...rest) => {
    if (held(key)) await gate;
    return getStream.call(store, key, ...rest);
  };
  return () => {
    store.get = get;
    store.getStream = getStream;
    open();
  };
}
