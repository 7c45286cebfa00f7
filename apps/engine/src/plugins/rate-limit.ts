/**
 * Per-caller rate limit on every mutating POST, applied AFTER the capability gate (specification
 * "Endpoints": "Every mutating POST is rate-limited per caller after its capability gate and
 * fails open if the limiter is unavailable"), as the named plugin `coffer-rate-limit`.
 *
 * Counting uses @fastify/rate-limit's `createRateLimit` (its in-memory store by default). That
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
import type { GateHook } from './capability.ts';
import { sendRateLimited } from './replies.ts';

export const POLICY_NAME = 'mutations';

export interface RateLimitOptions {
  /** Requests allowed per caller per window (default 60). */
  max?: number;
  /** Window length in seconds (default 60). */
  windowSeconds?: number;
  /** A custom @fastify/rate-limit store constructor (for a shared store across replicas). */
  store?: unknown;
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
    ...(options.store ? { store: options.store as never } : {}),
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
