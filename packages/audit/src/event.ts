/**
 * The audit event and its hash: builds the next link of the chain (docs/audit.md, "Event" and
 * "Hash").
 *
 *   hash = "sha384:" || lower-hex( SHA-384( UTF-8( JCS( event without its `hash` member ) ) ) )
 *
 * where JCS is RFC 8785 canonical JSON. The hashed object includes `prevHash`, so each event
 * commits to the whole chain before it; the first event's `prevHash` is {@link GENESIS_HASH}.
 *
 * Security-relevant behaviour: every string the caller supplies goes through the redaction guard
 * (redact.ts) before it is hashed, so a secret that slipped into `detail` or `target` is replaced
 * by `[redacted]` rather than written into an append-only record; `detail` is bounded to
 * {@link MAX_DETAIL_BYTES} of canonical JSON so backup data cannot ride along.
 */
import { canonicalJson, canonicalJsonBytes, type Digest, sha384Digest } from '@coffer/crypto';
import {
  ACTOR_METHODS,
  type ActorMethod,
  AUDIT_OUTCOMES,
  type AuditAction,
  type AuditOutcome,
  isAuditAction,
} from './actions.ts';
import { AuditError } from './errors.ts';
import { isDigest, isPlainObject, isSeq, notJsonReason } from './internal/shape.ts';
import { childPath, looksSecret, REDACTED, sanitizeDetail } from './redact.ts';

/** `prevHash` of the first event: `sha384:` followed by 96 zeros (no event hashes to it). */
export const GENESIS_HASH = `sha384:${'0'.repeat(96)}` as Digest;

/** Largest `detail`, in bytes of its canonical JSON. */
export const MAX_DETAIL_BYTES = 4096;

/** Deepest nesting allowed in `detail` (the object itself is level 1). */
export const MAX_DETAIL_DEPTH = 6;

/** A JSON value as stored in `detail`. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A verified person (or nobody: both null for the bare admin token and the engine). */
export interface AuditIdentity {
  email: string | null;
  subject: string | null;
}

/** Who acted and how they authenticated. */
export interface AuditActor extends AuditIdentity {
  method: ActorMethod;
}

/**
 * A chain position: the seq and hash of an event (or `{ seq: 0, hash: GENESIS_HASH }` before the
 * first). Structurally the same as @coffer/state's `AuditHead`.
 */
export interface AuditAnchor {
  seq: number;
  hash: string;
}

/** The genesis anchor: the position before event 1. */
export const GENESIS_ANCHOR: Readonly<AuditAnchor> = Object.freeze({ seq: 0, hash: GENESIS_HASH });

/**
 * One audit event as stored, exported and served in feed pages. `action` and `outcome` are typed
 * as strings because a verifier must accept names a newer engine writes.
 */
export interface AuditEvent {
  /** Position in the chain: 1, 2, 3, ... with no gaps. */
  seq: number;
  /** RFC 3339 UTC to the millisecond, e.g. `2025-01-31T12:00:00.000Z`. Informative: order is by seq. */
  ts: string;
  /** Kebab-case action name; the engine writes only {@link AUDIT_ACTIONS} members. */
  action: AuditAction | (string & {});
  actor: AuditActor;
  /** The actor's resolved role at the time (`owner`, ...), or null (engine, pull credential). */
  role: string | null;
  /** Client address of the request, or null for engine-observed events. */
  sourceAddress: string | null;
  /** The second person whose approval this event carries out, or null. */
  approver: AuditIdentity | null;
  /** What the action was about (a job id, a scope, a change id), or null. */
  target: string | null;
  outcome: AuditOutcome | (string & {});
  /** Small JSON object of safe fields (never a secret, token, URL credential or backup data). */
  detail: { [key: string]: JsonValue };
  /** The previous event's `hash`, or {@link GENESIS_HASH} for seq 1. */
  prevHash: string;
  /** `sha384:<hex>` over the canonical JSON of every other member (see module comment). */
  hash: string;
}

/** An event before hashing: exactly the object the hash covers. */
export type UnhashedAuditEvent = Omit<AuditEvent, 'hash'>;

/** What the engine supplies for a new event; the builder adds seq, ts, prevHash and hash. */
export interface AuditEventInput {
  action: AuditAction;
  actor: AuditActor;
  role?: string | null;
  sourceAddress?: string | null;
  approver?: AuditIdentity | null;
  target?: string | null;
  outcome: AuditOutcome;
  detail?: Record<string, unknown>;
}

/**
 * The hash of an event: `sha384:` + hex SHA-384 of the RFC 8785 canonical JSON of `event` with its
 * `hash` member (if any) removed. Every other member counts, including unknown ones. Throws
 * `ERR_AUDIT_INVALID_EVENT` when the event has no canonical JSON form.
 */
export function hashEvent(event: UnhashedAuditEvent | AuditEvent | Record<string, unknown>): Digest {
  const { hash: _ignored, ...rest } = event as Record<string, unknown>;
  try {
    return sha384Digest(canonicalJsonBytes(rest));
  } catch {
    throw new AuditError('ERR_AUDIT_INVALID_EVENT', 'event has no canonical JSON form');
  }
}

function invalid(message: string): never {
  throw new AuditError('ERR_AUDIT_INVALID_EVENT', message);
}

/** A bounded string or null; identity fields only get the strong redaction rules. */
function optionalString(value: unknown, field: string, max: number, heuristics: boolean): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') invalid(`${field} must be a string or null`);
  if (looksSecret(value, { heuristics }) !== null) return REDACTED;
  if (value.length > max) invalid(`${field} is longer than ${max} characters`);
  return value;
}

/**
 * A target that is a person's subject as @coffer/identity forms it for single sign-on
 * (`oidc:<connection>:<issuer>#<sub>`, `saml:<connection>:<entity id>#<NameID>`): its issuer or
 * entity id is a URL with a path and its id may be long and opaque, so, like the actor's subject,
 * it is checked against the strong rules only and may be as long as a subject (512).
 */
const SUBJECT_TARGET = /^(oidc|saml):[a-z0-9][a-z0-9-]{0,63}:[^#\s]+#\S+$/;

function target(value: unknown): string | null {
  if (typeof value === 'string' && SUBJECT_TARGET.test(value))
    return optionalString(value, 'target', 512, false);
  return optionalString(value, 'target', 256, true);
}

function identity(value: unknown, field: string): AuditIdentity {
  if (!isPlainObject(value)) invalid(`${field} must be an object`);
  return {
    email: optionalString(value.email, `${field}.email`, 320, false),
    subject: optionalString(value.subject, `${field}.subject`, 512, false),
  };
}

/**
 * Builds the event that follows `prev` (the chain head, or null for an empty chain): assigns
 * `seq = prev.seq + 1`, `ts = now.toISOString()`, `prevHash = prev.hash` (or GENESIS_HASH),
 * sanitises every caller string and `detail` through the redaction guard, and computes `hash`.
 * Pure; does not store anything.
 *
 * Throws `ERR_AUDIT_UNKNOWN_ACTION` (action not in AUDIT_ACTIONS), `ERR_AUDIT_INVALID_EVENT`
 * (a field of the wrong type or size, a bad `prev` or `now`, `detail` not plain JSON) and
 * `ERR_AUDIT_DETAIL_TOO_LARGE` (canonical `detail` over MAX_DETAIL_BYTES).
 */
export function buildEvent(
  prev: AuditAnchor | null,
  input: AuditEventInput,
  now: Date = new Date(),
): AuditEvent {
  if (prev !== null && !(isPlainObject(prev) && isSeq(prev.seq) && isDigest(prev.hash))) {
    invalid('prev must be null or a chain head { seq, hash }');
  }
  if (!(now instanceof Date) || !Number.isFinite(now.getTime())) invalid('now must be a valid Date');
  const ts = now.toISOString();
  if (ts.length !== 24) invalid('now must be between years 0000 and 9999');
  if (!isPlainObject(input)) invalid('input must be an object');
  if (!isAuditAction(input.action)) {
    throw new AuditError(
      'ERR_AUDIT_UNKNOWN_ACTION',
      'action is not one of AUDIT_ACTIONS (see docs/audit.md)',
    );
  }
  const actorIn = input.actor as unknown;
  if (!isPlainObject(actorIn)) invalid('actor must be an object');
  if (!(ACTOR_METHODS as readonly unknown[]).includes(actorIn.method)) {
    invalid(`actor.method must be one of ${ACTOR_METHODS.join(', ')}`);
  }
  if (!(AUDIT_OUTCOMES as readonly unknown[]).includes(input.outcome)) {
    invalid(`outcome must be one of ${AUDIT_OUTCOMES.join(', ')}`);
  }
  const detailIn = input.detail ?? {};
  if (!isPlainObject(detailIn)) invalid('detail must be a plain object');
  const reason = notJsonReason(detailIn, 'detail', MAX_DETAIL_DEPTH, childPath);
  if (reason !== null) invalid(reason);
  // Round-trip through canonical JSON so the stored object is exactly the hashed one (no -0, no
  // prototype tricks, sorted members) before the guard looks at it.
  const detail = sanitizeDetail(JSON.parse(canonicalJson(detailIn)) as Record<string, JsonValue>).value;
  if (canonicalJsonBytes(detail).length > MAX_DETAIL_BYTES) {
    throw new AuditError(
      'ERR_AUDIT_DETAIL_TOO_LARGE',
      `detail exceeds ${MAX_DETAIL_BYTES} bytes of canonical JSON`,
    );
  }
  const unhashed: UnhashedAuditEvent = {
    seq: prev === null ? 1 : prev.seq + 1,
    ts,
    action: input.action,
    actor: { ...identity(actorIn, 'actor'), method: actorIn.method as ActorMethod },
    role: optionalString(input.role, 'role', 64, false),
    sourceAddress: optionalString(input.sourceAddress, 'sourceAddress', 128, false),
    approver:
      input.approver === undefined || input.approver === null ? null : identity(input.approver, 'approver'),
    target: target(input.target),
    outcome: input.outcome,
    detail,
    prevHash: prev === null ? GENESIS_HASH : prev.hash,
  };
  return { ...unhashed, hash: hashEvent(unhashed) };
}
