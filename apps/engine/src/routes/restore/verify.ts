/**
 * Verify (read and check every in-scope record, write nothing) and keyless attestation
 * (signature, completeness, anti-rollback). A verify runs within the read limits, as a dry run.
 */
import { validateRestoreRequest } from '@coffer/restore';
import type { FastifyInstance } from 'fastify';
import { inReadSlot, RestoreBody, sendRestoreError } from './shared.ts';

export default async function verifyRoutes(app: FastifyInstance): Promise<void> {
  app.post(
    '/restore/verify',
    {
      onRequest: [app.requireCapability('restore.verify'), app.rateLimitCaller],
      config: { capability: 'restore.verify' },
      schema: {
        summary: 'Verify every in-scope record of a restore request (writes nothing)',
        operationId: 'restoreVerify',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        const req = validateRestoreRequest(request.body);
        return await inReadSlot(app, request, reply, () => app.restores.verify(req));
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  app.post(
    '/restore/attest',
    {
      onRequest: [app.requireCapability('restore.verify'), app.rateLimitCaller],
      config: { capability: 'restore.verify' },
      schema: {
        summary: 'Keyless attestation: signature, completeness, anti-rollback',
        operationId: 'restoreAttest',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        return await app.restores.attest(validateRestoreRequest(request.body));
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );
}
