/**
 * First-run key set-up from the console (docs/console.md "First-run set-up"):
 * `POST /admin/setup/break-glass-key` `{ publicKey }` (`keys.ceremony`, step-up): the armoured
 * break-glass PUBLIC key the operator generated in the browser (or with `coffer-recover keygen`).
 * Accepted only while the engine has none: a key already set (by ENGINE_BREAK_GLASS_PUBLIC_KEY or
 * an earlier call) is never replaced here, so a stolen owner session cannot swap in a key of its
 * own for future archives (409). A secret key is refused (400) without echoing it. The key is kept
 * in the state store (shared by replicas; adopted at each start) and used at once by this engine.
 * Audited as `break-glass-key-set` with the fingerprint, and raised as the `break-glass-key-set`
 * notification event (src/events.ts) with the fingerprint only.
 *
 * `POST /admin/setup/acknowledge` (`keys.ceremony`, body ignored): the owner states the key set-up
 * is done. Accepted only while the keys are observed present (signer, operational and the
 * break-glass public key; a key another replica stored is adopted first); otherwise 409 naming
 * the missing variables. The first acknowledgement is kept (setting `setup.acknowledged`, with the
 * fingerprints it saw) and shown by `GET /admin/setup-state`; a repeat answers 200 with the kept
 * record. Audited as `setup-acknowledge` (detail `keysReady`, and `missing` on a refusal).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { adoptBreakGlassKey, BREAK_GLASS_SETTING, readBreakGlassPublicKey } from '../../keys.ts';
import { sendStateUnavailable } from '../../plugins/replies.ts';
import {
  acknowledgementCurrent,
  keysMissing,
  readAcknowledgement,
  SETUP_ACK_SETTING,
  type SetupAcknowledgement,
} from '../../posture/index.ts';

const Body = Type.Object(
  { publicKey: Type.String({ minLength: 1, maxLength: 16384 }) },
  { additionalProperties: false },
);

const REFUSALS = {
  'secret-key':
    'this is a SECRET key: send only the public half (the .pub file); keep the secret key offline and never give it to the engine',
  'wrong-kind': 'this is not a break-glass (recipient) public key',
  unreadable: 'this is not a Coffer key file (expected the armoured text of a .pub file)',
} as const;

export default async function setupRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: { publicKey: string } }>(
    '/setup/break-glass-key',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller],
      config: { capability: 'keys.ceremony' },
      schema: {
        summary: 'Give the engine the break-glass public key (only while it has none)',
        operationId: 'postSetupBreakGlassKey',
        tags: ['admin', 'status'],
        body: Body,
      },
    },
    async (request, reply) => {
      const keys = app.keys;
      if (keys.breakGlass !== null)
        return reply.code(409).send({
          error: 'a break-glass key is already set; it is not replaced from the console',
          fingerprint: keys.breakGlass.fingerprint,
        });
      const holder = readBreakGlassPublicKey(request.body.publicKey);
      if (typeof holder === 'string') {
        await app.audit.forRequest(request, {
          action: 'break-glass-key-set',
          outcome: 'refused',
          target: 'break-glass-key',
          detail: { reason: holder },
        });
        return reply.code(400).send({ error: REFUSALS[holder] });
      }
      let set: boolean;
      try {
        set = await app.state.settings.setIfAbsent(BREAK_GLASS_SETTING, request.body.publicKey.trim());
      } catch {
        return sendStateUnavailable(reply);
      }
      if (!set) {
        // Another replica or request set one first: adopt what is stored, never this one.
        const stored = readBreakGlassPublicKey(
          (await app.state.settings.get<string>(BREAK_GLASS_SETTING)) ?? '',
        );
        if (typeof stored !== 'string') adoptBreakGlassKey(keys, stored);
        return reply.code(409).send({
          error: 'a break-glass key is already set; it is not replaced from the console',
          fingerprint: typeof stored === 'string' ? null : stored.fingerprint,
        });
      }
      adoptBreakGlassKey(keys, holder);
      await app.audit.forRequest(request, {
        action: 'break-glass-key-set',
        outcome: 'applied',
        target: 'break-glass-key',
        detail: { fingerprint: holder.fingerprint },
      });
      app.events.raise({
        name: 'break-glass-key-set',
        jobId: null,
        detail: { fingerprint: holder.fingerprint, by: request.caller?.subject ?? 'admin-token' },
      });
      request.log.info(
        { event: 'break-glass-key-set', fingerprint: holder.fingerprint },
        'break-glass key set',
      );
      return { ok: true, fingerprint: holder.fingerprint, keysReady: keys.ready, missing: keys.missing };
    },
  );

  app.post(
    '/setup/acknowledge',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.rateLimitCaller],
      config: { capability: 'keys.ceremony' },
      schema: {
        summary: 'Acknowledge the key set-up (only while every key is observed present)',
        operationId: 'postSetupAcknowledge',
        tags: ['admin', 'status'],
      },
    },
    async (request, reply) => {
      const keys = app.keys;
      try {
        // Observe, not assume: a break-glass key another replica stored counts once adopted here.
        if (keys.breakGlass === null) {
          const stored = await app.state.settings.get<string>(BREAK_GLASS_SETTING);
          const holder = stored ? readBreakGlassPublicKey(stored) : 'unreadable';
          if (typeof holder !== 'string') adoptBreakGlassKey(keys, holder);
        }
      } catch {
        return sendStateUnavailable(reply);
      }
      const missing = keysMissing(keys);
      if (missing.length > 0 || keys.breakGlass === null) {
        await app.audit.forRequest(request, {
          action: 'setup-acknowledge',
          outcome: 'refused',
          target: null,
          detail: { keysReady: false, missing },
        });
        return reply
          .code(409)
          .send({ error: 'keys are not all present; set them before acknowledging', missing });
      }
      const record: SetupAcknowledgement = {
        at: new Date().toISOString(),
        by: request.caller?.subject ?? 'admin-token',
        fingerprints: {
          signer: keys.signer.fingerprint,
          operational: keys.operational.fingerprint,
          breakGlass: keys.breakGlass.fingerprint,
        },
      };
      let set: boolean;
      let kept: SetupAcknowledgement | null;
      try {
        set = await app.state.settings.setIfAbsent(SETUP_ACK_SETTING, record);
        kept = set ? record : await readAcknowledgement(app.state);
      } catch {
        return sendStateUnavailable(reply);
      }
      if (set) {
        await app.audit.forRequest(request, {
          action: 'setup-acknowledge',
          outcome: 'applied',
          target: null,
          detail: { keysReady: true, fingerprints: record.fingerprints },
        });
        request.log.info({ event: 'setup-acknowledge' }, 'key set-up acknowledged');
      }
      return {
        ok: true,
        alreadyAcknowledged: !set,
        keysReady: true,
        acknowledgement: kept
          ? { at: kept.at, fingerprints: kept.fingerprints, current: acknowledgementCurrent(kept, keys) }
          : null,
      };
    },
  );
}
