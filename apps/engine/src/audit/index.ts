/**
 * The engine side of the audit chain: `app.audit`, the one service every route calls to record
 * what it applied or refused (docs/audit.md "Action names"; /work/notes engine-status "AUDIT API").
 *
 * - `app.audit.append(input)` records one event through @coffer/audit's `createAuditLog` over
 *   `state.audit`, whose append is one serialised transaction (SQLite BEGIN IMMEDIATE, PostgreSQL
 *   advisory lock), so the chain stays linear under concurrent writers and across engine
 *   processes on one PostgreSQL.
 * - `app.audit.forRequest(request, event)` fills in the actor (email, subject, method), the role
 *   and the source address (the request ip) from the authenticated caller.
 * - Routes that declare `config: { audit: { action } }` get a `refused` event written by the
 *   onResponse hook here when the capability gate answered 403, without touching the gate.
 * - At start (`recordStartFacts`): `engine-version-change` when the version differs from the last
 *   recorded one, and `engine-secret-present` for each secret variable whose presence changed
 *   since the last start (a first start counts as a change for every present secret). Presence
 *   only: the event names the variable, never its value.
 *
 * Security-relevant behaviour: every event passes @coffer/audit's redaction guard before it is
 * hashed; the caller's token, cookie or assertion is never an input here. A failing audit write
 * after a mutation is logged (code only) and does not undo or fail the mutation: `append` never
 * throws, `appendStrict` does (for callers that must not proceed unaudited).
 */
import {
  type AuditAction,
  type AuditEvent,
  type AuditEventInput,
  type AuditIdentity,
  type AuditLog,
  type AuditOutcome,
  createAuditLog,
} from '@coffer/audit';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type EngineCaller, roleName } from '../auth/caller.ts';
import type { EngineConfig } from '../config.ts';
import type { State } from '../state/index.ts';
import { ENGINE_VERSION } from '../version.ts';

/** What a route supplies; actor, role and source address come from the request. */
export interface RequestAuditEvent {
  action: AuditAction;
  outcome: AuditOutcome;
  target?: string | null;
  approver?: AuditIdentity | null;
  detail?: Record<string, unknown>;
}

export interface EngineAudit {
  /** The underlying log (list, feed pages, export, verify, head). */
  readonly log: AuditLog;
  /** Records `input`; returns the event, or null when the write failed (logged, never thrown). */
  append(input: AuditEventInput): Promise<AuditEvent | null>;
  /** Records `input`; throws ERR_AUDIT_* when the write fails. */
  appendStrict(input: AuditEventInput): Promise<AuditEvent>;
  /** Records an event for the authenticated caller of `request` (never throws). */
  forRequest(request: FastifyRequest, event: RequestAuditEvent): Promise<AuditEvent | null>;
  /** The actor fields for `request` (the engine itself when there is no caller). */
  actorOf(request: FastifyRequest): Pick<AuditEventInput, 'actor' | 'role' | 'sourceAddress'>;
}

/** Route config: the action a 403 from the capability gate is recorded under. */
export interface RouteAuditConfig {
  action: AuditAction;
  /** Request body field naming the target (for example `id`); read only when it is a string. */
  targetField?: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    audit: EngineAudit;
  }
  interface FastifyContextConfig {
    audit?: RouteAuditConfig;
  }
}

const METHOD: Record<EngineCaller['method'], AuditEventInput['actor']['method']> = {
  'perimeter-access': 'perimeter-jwt',
  session: 'session',
  'admin-token': 'admin-token',
};

/** The engine as actor (observed facts, scheduled work). */
export const ENGINE_ACTOR = { email: null, subject: null, method: 'engine' } as const;

/** Requests whose handler already recorded an event (the refusal hook then stays quiet). */
const recorded = new WeakSet<FastifyRequest>();

export function createEngineAudit(state: State, log: FastifyBaseLogger): EngineAudit {
  const auditLog = createAuditLog(state.audit);
  const appendStrict = (input: AuditEventInput) => auditLog.record(input);
  const append = async (input: AuditEventInput): Promise<AuditEvent | null> => {
    try {
      return await auditLog.record(input);
    } catch (err) {
      const e = err as { code?: string; causeCode?: string };
      log.error(
        { audit: 'append-failed', action: input.action, code: e.code, causeCode: e.causeCode },
        'audit event not recorded',
      );
      return null;
    }
  };
  const actorOf = (request: FastifyRequest) => {
    const caller = request.caller;
    if (!caller) return { actor: { ...ENGINE_ACTOR }, role: null, sourceAddress: request.ip ?? null };
    return {
      actor: { email: caller.email, subject: caller.subject, method: METHOD[caller.method] },
      role: roleName(caller.role),
      sourceAddress: request.ip ?? null,
    };
  };
  return {
    log: auditLog,
    append,
    appendStrict,
    actorOf,
    forRequest: (request, event) => {
      recorded.add(request);
      return append({
        ...actorOf(request),
        action: event.action,
        outcome: event.outcome,
        target: event.target ?? null,
        approver: event.approver ?? null,
        detail: event.detail ?? {},
      });
    },
  };
}

/** Secret variables whose presence (never value) is recorded as `engine-secret-present`. */
export function secretPresence(config: EngineConfig): Record<string, boolean> {
  return {
    ADMIN_TOKEN: config.adminToken !== undefined,
    SCIM_BEARER_TOKEN: config.scimBearerToken !== undefined,
    ENGINE_SIGNER_KEY_FILE: config.signerKeyFile !== undefined,
    ENGINE_OPERATIONAL_KEY_FILE: config.operationalKeyFile !== undefined,
    ENGINE_SMTP_PASSWORD: config.mail?.password !== undefined,
  };
}

export const VERSION_SETTING = 'audit.engine-version';
export const SECRETS_SETTING = 'audit.secret-presence';

/**
 * The start-up facts: version change and secret presence changes, each compared with what the
 * settings store last recorded. Never throws (a failure is logged; the engine still starts).
 */
export async function recordStartFacts(
  audit: EngineAudit,
  state: State,
  config: EngineConfig,
  log: FastifyBaseLogger,
  version: string = ENGINE_VERSION,
): Promise<void> {
  try {
    const last = await state.settings.get<string>(VERSION_SETTING);
    if (last !== version) {
      const ev = await audit.append({
        action: 'engine-version-change',
        actor: { ...ENGINE_ACTOR },
        outcome: 'observed',
        detail: { from: typeof last === 'string' ? last : null, to: version },
      });
      if (ev) await state.settings.set(VERSION_SETTING, version);
    }
    const recorded = (await state.settings.get<Record<string, boolean>>(SECRETS_SETTING)) ?? {};
    const now = secretPresence(config);
    const next: Record<string, boolean> = { ...recorded };
    for (const [variable, present] of Object.entries(now)) {
      const before = recorded[variable];
      if (before === present || (before === undefined && !present)) continue;
      const ev = await audit.append({
        action: 'engine-secret-present',
        actor: { ...ENGINE_ACTOR },
        outcome: 'observed',
        target: null,
        detail: { variable, present },
      });
      if (ev) next[variable] = present;
    }
    await state.settings.set(SECRETS_SETTING, next);
  } catch (err) {
    log.error(
      { audit: 'start-facts-failed', code: (err as { code?: string }).code },
      'start facts not recorded',
    );
  }
}

function targetOf(request: FastifyRequest, field: string | undefined): string | null {
  if (!field) return null;
  const body = request.body as Record<string, unknown> | null | undefined;
  const v = body && typeof body === 'object' ? body[field] : undefined;
  return typeof v === 'string' ? v.slice(0, 256) : null;
}

async function auditPlugin(app: FastifyInstance, options: { state: State }): Promise<void> {
  const audit = createEngineAudit(options.state, app.log);
  app.decorate('audit', audit);
  // A capability refusal on a route that names its audit action is recorded as `refused`.
  app.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
    const cfg = request.routeOptions?.config as { audit?: RouteAuditConfig; capability?: string } | undefined;
    if (!cfg?.audit || reply.statusCode !== 403 || !request.caller || recorded.has(request)) return;
    await audit.forRequest(request, {
      action: cfg.audit.action,
      outcome: 'refused',
      target: targetOf(request, cfg.audit.targetField),
      detail: { reason: 'capability', required: cfg.capability ?? null },
    });
  });
}

export default fp(auditPlugin, {
  name: 'coffer-audit',
  fastify: '5.x',
  dependencies: ['coffer-auth'],
});
