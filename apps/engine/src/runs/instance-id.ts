/**
 * Identities of the run machinery: this process's holder id (persisted in the data directory, so a
 * restarted engine takes its own run locks back at once instead of waiting for them to expire) and
 * new run ids.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** The holder id kept in `<dataDir>/instance-id` (created on first start); fresh without a dir. */
export function loadInstanceId(dataDir: string | undefined): string {
  const fresh = `${hostname()}-${randomBytes(6).toString('hex')}`;
  if (!dataDir) return fresh;
  const file = join(dataDir, 'instance-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9._-]{1,128}$/.test(id)) return id;
  } catch {
    // first start
  }
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${fresh}\n`, { flag: 'wx', mode: 0o600 });
    return fresh;
  } catch {
    return readFileSync(file, 'utf8').trim() || fresh;
  }
}

/** A new run id: UTC start time to the millisecond, then 8 random hex digits (sortable, path-safe). */
export function newRunId(now: Date): string {
  const t = now
    .toISOString()
    .replace(/[-:.]/g, '')
    .replace(/^(\d{8}T\d{6})(\d{3})Z$/, '$1$2Z');
  return `${t}-${randomBytes(4).toString('hex')}`;
}

/** The run lock of a job: one lease per job, so no job runs twice at once across processes. */
export const runLock = (job: string): string => `run:${job}`;
