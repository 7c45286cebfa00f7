/**
 * Per-caller rate limit on every mutating POST, applied AFTER the capability gate (specification
 * "Endpoints": "Every mutating POST is rate-limited per caller after its capability gate and
 * fails open if the limiter is unavailable"), as the named plugin `coffer-rate-limit`.
 *
 * Counting uses @fastify/rate-limit's `createRateLimit` over a store kept in the engine's state
 * store (`state.rateLimits`: one row per caller with its window start and count, bumped by one
 * atomic upsert), so every engine process sharing the database (PostgreSQL replicas) counts
 * against one limit: requests spread over replicas hit it at the same total as on one. That
 * plugin emits only the older draft's `RateLimit-Limit/-Remaining/-Reset` headers, so this plugin
 * writes the current draft's structured fields itself (draft-ietf-httpapi-ratelimit-headers-10/11):
 *   RateLimit-Policy: "mutations";q=<quota>;w=<window seconds>
 *   RateLimit: "mutations";r=<remaining>;t=<seconds until the window resets>
 * and on a refusal `Retry-After` in whole seconds (at least 1) with the problem+json 429 body.
 * The key is the caller's stable subject, or `admin-token` for the bare token; a limiter error is
 * logged and the request proceeds (fail open), because a broken counter must not stop backups'
 * configuration from being managed.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { State } from '../state/index.ts';
import type { GateHook } from './capability.ts';
import { sendRateLimited } from './replies.ts';

export const POLICY_NAME = 'mutations';

export interface RateLimitOptions {
  /** Requests allowed per caller per window (default 60). */
  max?: number;
  /** Window length in seconds (default 60). */
  windowSeconds?: number;
  /** A custom @fastify/rate-limit store constructor (tests: a store that fails). */
  store?: unknown;
  /** The state store whose counters the limiter uses (absent: @fastify/rate-limit's in-memory store). */
  state?: Pick<State, 'rateLimits'>;
}

type Counted = (err: Error | null, res?: { current: number; ttl: number }) => void;

/**
 * A @fastify/rate-limit store over `state.rateLimits`. The window is fixed (as the in-memory
 * store's): it opens at a caller's first request and the count restarts when it is over. Rows of
 * windows long over are pruned at most once per window, from a request, never on a timer.
 */
export function stateRateLimitStore(state: Pick<State, 'rateLimits'>): new () => unknown {
  let lastPrune = 0;
  const prune = (windowMs: number) => {
    const now = Date.now();
    if (now - lastPrune < windowMs) return;
    lastPrune = now;
    state.rateLimits.prune(2 * windowMs).catch(() => undefined);
  };
  const reply = (p: Promise<{ count: number; resetInMs: number }>, cb: Counted) =>
    p.then(
      (r) => cb(null, { current: r.count, ttl: r.resetInMs }),
      (e: Error) => cb(e),
    );
  return class StateRateLimitStore {
    incr(key: string, cb: Counted, timeWindow: number): void {
      prune(timeWindow);
      reply(state.rateLimits.hit(key, timeWindow), cb);
    }
    read(key: string, cb: Counted, timeWindow: number): void {
      reply(state.rateLimits.read(key, timeWindow), cb);
    }
    child(): this {
      return this;
    }
  };
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimitCaller: GateHook;
  }
}

export function callerKey(request: FastifyRequest): string {
  const caller = request.caller;
  if (!caller) return `ip:${request.ip}`;
  return caller.subject === null ? 'admin-token' : `subject:${caller.subject}`;
}

async function limiter(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  const max = options.max ?? 60;
  const windowSeconds = options.windowSeconds ?? 60;
  await app.register(rateLimit, {
    global: false,
    max,
    timeWindow: windowSeconds * 1000,
    skipOnError: true,
    keyGenerator: callerKey,
    ...(options.store
      ? { store: options.store as never }
      : options.state
        ? { store: stateRateLimitStore(options.state) as never }
        : {}),
  });
  // skipOnError off here: a store error must reach the catch below (fail open, no made-up headers).
  const check = app.createRateLimit({ keyGenerator: callerKey, skipOnError: false });
  const policy = `"${POLICY_NAME}";q=${max};w=${windowSeconds}`;

  app.decorate('rateLimitCaller', async (request: FastifyRequest, reply: FastifyReply) => {
    let result: Awaited<ReturnType<typeof check>>;
    try {
      result = await check(request);
    } catch {
      request.log.warn({ limiter: 'unavailable' }, 'rate limiter unavailable; failing open');
      return;
    }
    if (result.isAllowed) return;
    const reset = Math.max(1, Math.ceil(result.ttl / 1000));
    reply.header('ratelimit-policy', policy);
    reply.header('ratelimit', `"${POLICY_NAME}";r=${Math.max(0, result.remaining)};t=${reset}`);
    if (result.isExceeded) {
      reply.header('retry-after', String(reset));
      sendRateLimited(reply);
    }
  });
}

export default fp(limiter, { name: 'coffer-rate-limit', fastify: '5.x', dependencies: ['coffer-auth'] });
