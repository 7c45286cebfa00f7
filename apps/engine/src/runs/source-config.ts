/**
 * A job's `source` object as a @coffer/sources connector configuration: the one mapping shared by
 * the run executor (openJobSource, to back up) and the restore routes (to write back into the
 * job's source, and to pick a drill's scratch server).
 *
 * Security-relevant behaviour: connection secrets never live in a job; a job names the
 * environment variables that hold them (`passwordEnv`, `accessKeyIdEnv`, `secretAccessKeyEnv`) and
 * they are read here, when a connector is about to be opened, and put into the configuration
 * only (never into a reply, a log or the state store).
 */

/** A job's `source` object as the jobs routes validated it. */
export type JobSource = { type: string } & Record<string, unknown>;

function env(name: unknown): string | undefined {
  return typeof name === 'string' ? process.env[name] : undefined;
}

/**
 * The connector configuration of a job's source (`binding` = the job id), secrets resolved from
 * the environment; null for a source type no connector handles. Never throws.
 */
export function jobSourceConfig(source: JobSource, binding: string): Record<string, unknown> | null {
  switch (source.type) {
    case 'files':
      return { type: 'files', root: source.path, binding };
    case 'sqlite':
      return { type: 'sqlite', path: source.path, binding };
    case 'redis': {
      let url = String(source.url);
      const password = env(source.passwordEnv);
      if (password !== undefined) {
        const u = new URL(url);
        u.password = password;
        url = u.toString();
      }
      const config: Record<string, unknown> = { type: 'redis', url, binding };
      if (source.db !== undefined) config.db = source.db;
      if (source.keyPrefix !== undefined) config.prefix = source.keyPrefix;
      return config;
    }
    case 's3': {
      const config: Record<string, unknown> = { type: 's3', bucket: source.bucket, binding };
      for (const k of ['prefix', 'endpoint', 'region', 'forcePathStyle'] as const)
        if (source[k] !== undefined) config[k] = source[k];
      const accessKeyId = env(source.accessKeyIdEnv);
      const secretAccessKey = env(source.secretAccessKeyEnv);
      if (accessKeyId !== undefined && secretAccessKey !== undefined)
        config.credentials = { accessKeyId, secretAccessKey };
      return config;
    }
    default:
      return null;
  }
}
