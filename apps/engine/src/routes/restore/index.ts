/**
 * The restore routes (specification "Restore"; docs/restore.md is normative for bodies and
 * replies), one route group per file, each mapping HTTP onto the restore service
 * (src/restores/, `app.restores`) or the drill service (`app.drills`): no restore logic lives here.
 * Registered in the order of the route snapshot.
 *
 * Security-relevant behaviour: request bodies are checked by `validateRestoreRequest` before any
 * read (exact 400 messages); replies carry plan hashes, counts and reasons, never tokens, keys or
 * record bytes.
 */
import type { FastifyInstance } from 'fastify';
import applyRoutes from './apply.ts';
import approvalRoutes from './approvals.ts';
import drillRoutes from './drills.ts';
import verifyRoutes from './verify.ts';

export default async function restoreRoutes(app: FastifyInstance): Promise<void> {
  await app.register(applyRoutes);
  await app.register(approvalRoutes);
  await app.register(verifyRoutes);
  await app.register(drillRoutes);
}
