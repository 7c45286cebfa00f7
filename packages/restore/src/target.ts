/**
 * Target resolution: where an apply writes. The engine's resolver maps a binding name to a source
 * configuration (with its secrets); this module applies the request's `target` override, checks
 * the source type, and confines filesystem targets to the restore roots (`ENGINE_RESTORE_ROOTS`).
 *
 * Security-relevant behaviour: a `files` or `sqlite` target must lie inside a configured restore
 * root after resolving every symbolic link of the part that exists (a link inside a root that
 * points out of it does not let a target escape); with no roots configured a filesystem restore is
 * refused. The target's identity (bound into the plan hash) and description never carry secrets:
 * Redis URLs lose their user and password, S3 credentials are never read.
 */
import { realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import {
  type FileNameProblem,
  FilesWriter,
  fileNameProblem,
  redisNameToKey,
  type SourceConfig,
} from '@coffer/sources';
import { RestoreError } from './errors.ts';
import type { PlanTarget, RestoreTargetOverride, TargetResolver } from './types.ts';

/** A resolved target: the connector configuration and its secret-free identity. */
export interface ResolvedTarget {
  config: SourceConfig;
  target: PlanTarget;
  /** Canonical identity bound into the plan hash. */
  identity: Record<string, string | number>;
}

/** Real path of `p`, resolving the nearest existing ancestor and appending the rest. */
export async function realPathOf(p: string): Promise<string> {
  const abs = resolve(p);
  const rest: string[] = [];
  let cur = abs;
  for (;;) {
    try {
      const real = await realpath(cur);
      return rest.length === 0 ? real : join(real, ...rest.reverse());
    } catch {
      const parent = dirname(cur);
      if (parent === cur) return abs;
      rest.push(basename(cur));
      cur = parent;
    }
  }
}

function within(child: string, root: string): boolean {
  const rel = relative(root, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/**
 * The real path of `path` when it lies inside one of `roots` (for a file, strictly below it),
 * else throws ERR_RESTORE_OUTSIDE_ROOTS.
 */
export async function confine(path: string, roots: string[], kind: 'directory' | 'file'): Promise<string> {
  if (roots.length === 0) {
    throw new RestoreError(
      'ERR_RESTORE_OUTSIDE_ROOTS',
      'filesystem restore is disabled: no restore roots are configured (ENGINE_RESTORE_ROOTS)',
    );
  }
  const real = await realPathOf(path);
  for (const root of roots) {
    const r = await realPathOf(root);
    if (within(real, r) && (kind === 'directory' || real !== r)) return real;
  }
  throw new RestoreError(
    'ERR_RESTORE_OUTSIDE_ROOTS',
    'the restore target is outside the configured restore roots (ENGINE_RESTORE_ROOTS)',
  );
}

function redisEndpoint(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}${u.port ? `:${u.port}` : ''}`;
  } catch {
    return 'redis';
  }
}

function s3Endpoint(endpoint: unknown): string {
  if (typeof endpoint !== 'string') return 'aws';
  try {
    const u = new URL(endpoint);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'custom';
  }
}

/**
 * Resolves the target of a plan: binding (override or the run's), the engine's configuration for
 * it, the override's namespace / bucket, type check and confinement. Throws RestoreError
 * ERR_RESTORE_UNKNOWN_TARGET, ERR_RESTORE_TARGET_MISMATCH, ERR_RESTORE_INVALID_REQUEST (an
 * override that does not fit the type) and ERR_RESTORE_OUTSIDE_ROOTS (unless `onRefused` is given).
 */
export async function resolveTarget(options: {
  job: string;
  sourceType: string;
  sourceBinding: string;
  override: RestoreTargetOverride | undefined;
  resolver: TargetResolver;
  restoreRoots: string[];
  /**
   * Given: a target outside the restore roots is reported here instead of thrown (a dry run), and
   * resolved lexically (links are not followed outside the roots) so the plan keeps an identity.
   */
  onRefused?: (e: RestoreError) => void;
}): Promise<ResolvedTarget> {
  const { override, sourceType } = options;
  const confined = async (path: string, kind: 'directory' | 'file') => {
    try {
      return await confine(path, options.restoreRoots, kind);
    } catch (e) {
      if (options.onRefused === undefined || !(e instanceof RestoreError)) throw e;
      options.onRefused(e);
      return resolve(path);
    }
  };
  const binding = override?.binding ?? options.sourceBinding;
  let base: SourceConfig | null;
  try {
    base = await options.resolver(binding, { job: options.job, sourceType });
  } catch (e) {
    throw new RestoreError('ERR_RESTORE_UNKNOWN_TARGET', 'the restore target could not be resolved', {
      cause: e,
    });
  }
  if (base === null || typeof base !== 'object') {
    throw new RestoreError('ERR_RESTORE_UNKNOWN_TARGET', 'the restore target binding is not configured');
  }
  if (base.type !== sourceType) {
    throw new RestoreError(
      'ERR_RESTORE_TARGET_MISMATCH',
      `the restore target is a ${base.type} source but the run holds ${sourceType} records`,
    );
  }
  const ns = override?.namespaceId;
  if (override?.bucketName !== undefined && base.type !== 's3') {
    throw new RestoreError('ERR_RESTORE_INVALID_REQUEST', 'target.bucketName applies only to an s3 target');
  }
  switch (base.type) {
    case 'files': {
      const root = await confined(ns ?? base.root, 'directory');
      const config = { ...base, root, binding };
      return {
        config,
        target: { type: 'files', binding, namespace: root, description: `files:${root}` },
        identity: { type: 'files', binding, root },
      };
    }
    case 'sqlite': {
      const path = await confined(ns ?? base.path, 'file');
      const config = { ...base, path, binding };
      return {
        config,
        target: { type: 'sqlite', binding, namespace: path, description: `sqlite:${path}` },
        identity: { type: 'sqlite', binding, path },
      };
    }
    case 'redis': {
      let db = base.db ?? dbOfUrl(base.url);
      if (ns !== undefined) {
        if (!/^\d{1,5}$/.test(ns))
          throw new RestoreError(
            'ERR_RESTORE_INVALID_REQUEST',
            'target.namespaceId of a redis target must be a database number',
          );
        db = Number(ns);
      }
      const prefix = base.prefix ?? '';
      const endpoint = redisEndpoint(base.url);
      const config = { ...base, db, binding, replace: true };
      const namespace = `db${db}${prefix ? ` prefix ${JSON.stringify(prefix)}` : ''}`;
      return {
        config,
        target: { type: 'redis', binding, namespace, description: `redis:${endpoint}/${db}` },
        identity: { type: 'redis', binding, endpoint, db, prefix },
      };
    }
    case 's3': {
      const bucket = override?.bucketName ?? base.bucket;
      const prefix = ns ?? base.prefix ?? '';
      const endpoint = s3Endpoint(base.endpoint);
      const config = { ...base, bucket, binding, ...(prefix ? { prefix } : {}) };
      if (!prefix) delete (config as { prefix?: string }).prefix;
      const namespace = prefix ? `${bucket}/${prefix}` : bucket;
      return {
        config,
        target: { type: 's3', binding, namespace, description: `s3://${namespace}` },
        identity: { type: 's3', binding, endpoint, bucket, prefix },
      };
    }
    default:
      throw new RestoreError(
        'ERR_RESTORE_TARGET_MISMATCH',
        'the restore target has an unsupported source type',
      );
  }
}

function dbOfUrl(url: string): number {
  try {
    const m = /^\/(\d+)$/.exec(new URL(url).pathname);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Restore's reasons (plan `skipped`) for the names the files writer refuses. */
const NAME_REASONS: Record<FileNameProblem, string> = {
  'not-a-string': 'name is not a string',
  empty: 'empty name',
  nul: 'name contains NUL',
  absolute: 'absolute name (would write outside the target)',
  'dot-dot-segment': "name has a '..' segment (would write outside the target)",
  'dot-segment': 'name has an empty or . segment',
  'empty-segment': 'name has an empty or . segment',
  'long-segment': 'name has a segment longer than 255 bytes',
};

/**
 * Why a record name cannot be written into a `files` target, or null when it can. The rule is
 * the files writer's own (`fileNameProblem` of @coffer/sources); this gives it restore's words.
 */
export function unsafeFileName(name: string): string | null {
  const problem = fileNameProblem(name);
  return problem === null ? null : NAME_REASONS[problem];
}

/**
 * The parent check of the files writer for a plan: a symbolic link (or a file) already in the
 * target where a parent directory must be would make the write refuse. Returns the reason, or null.
 */
export function parentChecker(root: string): (name: string) => string | null {
  const writer = new FilesWriter(`files:${root}`);
  return (name) =>
    writer.parentProblem(root, name) === null
      ? null
      : 'a parent in the target is a symbolic link or not a directory (would write outside the target)';
}

/** For redis targets: whether the record's key lies under the target's key prefix. */
export function redisNameFits(name: string, prefix: string): boolean {
  const key = redisNameToKey(name);
  if (key === null) return false;
  return key.subarray(0, Buffer.byteLength(prefix)).equals(Buffer.from(prefix));
}
