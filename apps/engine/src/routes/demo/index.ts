/**
 * `POST /admin/demo/reset` (specification "SCIM facade and test-only routes"; docs/configuration.md
 * `ENGINE_DEMO`): wipes a demo installation's state so the next visitor starts clean.
 *
 * Registered ONLY when ENGINE_DEMO is set; otherwise the admin family's not-found handler answers
 * the whole `/admin/demo/` prefix with a plain 404 before authentication. With the flag, the
 * caller is authenticated like any admin caller and must be the bare admin token (`method:
 * 'admin-token'`): any other caller, owners included, gets 403 with `required: 'admin-token'`.
 *
 * What a reset removes is state only (docs/configuration.md "Demo reset"): every job with its run
 * history and checkpoints, parked runs of deleted jobs, the scheduler's stand-down records, pending
 * and approved restore approvals (voided), stored restore applies and their progress, and the
 * restore approval policy. It never deletes or writes an object in a
 * destination: archives stay where they are whatever the demo set up, so a flag set by mistake on
 * a real installation cannot cost a backup. It keeps the audit chain (and appends `demo-reset`),
 * roles, sessions, pull credentials, keys and leases. It is refused (409) while a run or a restore
 * apply is running, since either would go on writing into the state being wiped.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden, sendUnauthorised } from '../../plugins/replies.ts';
import {
  APPLY_PREFIX,
  APPROVAL_ENABLED_KEY,
  APPROVAL_MIN_DELAY_KEY,
  PROGRESS_PREFIX,
} from '../../restores/index.ts';
import { REASON_RUN_FAILED } from '../../runs/reasons.ts';
import { STAND_DOWN_PREFIX } from '../../runs/service.ts';

export default async function demoRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', app.authenticate);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (reply.sent) return;
    const caller = request.caller;
    if (!caller) return void sendUnauthorised(reply);
    if (caller.method !== 'admin-token')
      return void sendForbidden(reply, 'admin-token', roleName(caller.role));
  });

  app.post(
    '/reset',
    {
      onRequest: [app.rateLimitCaller],
      schema: {
        summary: 'Wipe a demo installation (ENGINE_DEMO only; bare admin token; archives untouched)',
        operationId: 'demoReset',
        tags: ['admin', 'demo'],
      },
    },
    async (request, reply) => {
      const state = app.state;
      const running = await state.runs.listByStatus(['running']);
      const applies = await state.settings.list(APPLY_PREFIX);
      const applying = applies.filter((a) => (a.value as { status?: unknown } | null)?.status === 'running');
      if (running.length > 0 || applying.length > 0) {
        return reply.code(409).send({
          error: 'a run or a restore apply is running; reset again when it has finished',
          runs: running.length,
          applies: applying.length,
        });
      }

      let runs = 0;
      const jobs = await state.jobs.list();
      for (const job of jobs) {
        for (const run of await state.runs.listForJob(job.id)) {
          await state.checkpoints.delete(run.id);
          runs++;
        }
        // Drops the job's history ring and counters with it; archives are not the store's business.
        await state.jobs.delete(job.id);
      }
      // Runs left behind by jobs deleted earlier (ghost rows) go too.
      for (const run of await state.runs.listByStatus(['parked'])) {
        await state.runs.transition(run.id, ['parked'], {
          status: 'abandoned',
          reason: REASON_RUN_FAILED,
          finishedAt: new Date().toISOString(),
          detail: { abandoned: 'demo reset' },
        });
        await state.checkpoints.delete(run.id);
      }
      const open = await state.approvals.list({ status: ['pending', 'approved'] });
      for (const a of open) await state.approvals.transition(a.id, ['pending', 'approved'], 'void');
      const stale = [
        ...applies,
        ...(await state.settings.list(PROGRESS_PREFIX)),
        ...(await state.settings.list(STAND_DOWN_PREFIX)),
      ];
      for (const { key } of stale) await state.settings.delete(key);
      await state.settings.delete(APPROVAL_ENABLED_KEY);
      await state.settings.delete(APPROVAL_MIN_DELAY_KEY);

      const detail = { jobs: jobs.length, runs, approvals: open.length, applies: applies.length };
      await app.audit.forRequest(request, { action: 'demo-reset', outcome: 'applied', detail });
      return { ok: true, ...detail };
    },
  );
}
