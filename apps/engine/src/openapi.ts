/**
 * The route snapshot the specification's "Versioning" section describes: an OpenAPI document of
 * the engine's routes (paths, methods, summaries, operation ids, tags; no schemas), generated at
 * build time into `apps/engine/openapi/engine.json` for the console to serve at
 * `/api/openapi/engine.json`. The engine itself never serves it (it keeps to its path families).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { ENGINE_VERSION, SERVICE_NAME } from './version.ts';

interface Operation {
  summary?: string;
  operationId?: string;
  tags?: string[];
}

export interface RouteSnapshot {
  openapi: string;
  info: { title: string; version: string; description: string };
  paths: Record<string, Record<string, Operation>>;
}

/** Builds a throwaway engine (temporary data dir, no listener) and returns its route snapshot. */
export async function routeSnapshot(): Promise<RouteSnapshot> {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-openapi-'));
  try {
    const app = await buildApp({
      config: loadConfig({ ENGINE_DATA_DIR: dir }),
      logger: false,
      openapi: true,
    });
    try {
      await app.ready();
      const doc = (
        app as unknown as {
          swagger(): { openapi: string; paths?: Record<string, Record<string, Operation>> };
        }
      ).swagger();
      const paths: RouteSnapshot['paths'] = {};
      for (const path of Object.keys(doc.paths ?? {}).sort()) {
        const methods = doc.paths?.[path] ?? {};
        const out: Record<string, Operation> = {};
        for (const method of Object.keys(methods).sort()) {
          if (method === 'head') continue;
          const op = methods[method] ?? {};
          out[method] = {
            ...(op.summary ? { summary: op.summary } : {}),
            ...(op.operationId ? { operationId: op.operationId } : {}),
            ...(op.tags ? { tags: [...op.tags] } : {}),
          };
        }
        if (Object.keys(out).length > 0) paths[path] = out;
      }
      return {
        openapi: doc.openapi,
        info: {
          title: SERVICE_NAME,
          version: ENGINE_VERSION,
          description: 'Route snapshot of one engine version (no schemas); the engine is the authority.',
        },
        paths,
      };
    } finally {
      await app.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The snapshot as the committed file's text (stable formatting, trailing newline). */
export function snapshotText(snapshot: RouteSnapshot): string {
  return `${JSON.stringify(snapshot, null, 2)}\n`;
}
