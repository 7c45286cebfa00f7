/**
 * The one place that writes the specification's error bodies (Errors table), so every route
 * answers a failure the same way:
 *
 * - unknown route: 404 `text/plain` `not found`;
 * - malformed or rejected input (bad JSON, schema violation, wrong content type, oversized body):
 *   400 `{ error }` with a generic reason that never echoes the request body (never 413 or 415);
 * - 401: `text/plain` `unauthorised`; 403: `{ error: 'forbidden', required, have }`;
 * - 429: problem+json `{ type, title, status, error: 'rate limited' }` (headers set by the limiter);
 * - anything unhandled: 500 problem+json with the request id and no detail. The log line carries
 *   the request id and the error's code or name only, so a message that happened to contain a
 *   secret never reaches the log.
 */

import { isStateError } from '@coffer/state';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { EngineError } from '../errors.ts';

export function sendNotFound(reply: FastifyReply): FastifyReply {
  return reply.code(404).type('text/plain; charset=utf-8').send('not found');
}

export function sendUnauthorised(reply: FastifyReply): FastifyReply {
  return reply.code(401).type('text/plain; charset=utf-8').send('unauthorised');
}

export function sendForbidden(reply: FastifyReply, required: string, have: string): FastifyReply {
  return reply.code(403).send({ error: 'forbidden', required, have });
}

export function sendBadRequest(reply: FastifyReply, error: string): FastifyReply {
  return reply.code(400).send({ error });
}

export function sendRateLimited(reply: FastifyReply): FastifyReply {
  return reply
    .code(429)
    .type('application/problem+json')
    .send(
      JSON.stringify({
        type: 'urn:engine:error:rate-limited',
        title: 'Too many requests',
        status: 429,
        error: 'rate limited',
      }),
    );
}

export function sendInternalError(reply: FastifyReply, requestId: string): FastifyReply {
  return reply
    .code(500)
    .type('application/problem+json')
    .send(
      JSON.stringify({
        type: 'urn:engine:error:internal-error',
        title: 'Internal error',
        status: 500,
        error: 'internal error',
        requestId,
      }),
    );
}

/** 502: an admin route could not read the engine's state (fail closed, no detail). */
export function sendStateUnavailable(reply: FastifyReply): FastifyReply {
  return reply.code(502).send({ error: 'state unavailable' });
}

// Fastify's own client-error codes and the generic reason each gets.
const CLIENT_ERRORS: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'malformed JSON body',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'empty JSON body',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'request body must be application/json',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid content length',
  FST_ERR_CTP_BODY_TOO_LARGE: 'request body too large',
  FST_ERR_CTP_INVALID_TYPE: 'invalid content type',
};

function validationReason(error: FastifyError): string {
  const first = error.validation?.[0];
  if (!first) return 'invalid request';
  const where = error.validationContext ?? 'body';
  const path = first.instancePath ? `${where}${first.instancePath}` : where;
  if (first.keyword === 'additionalProperties') return `${path} has an unknown property`;
  // Ajv messages describe the rule (type, range, pattern), never the offending value.
  return `${path} ${first.message ?? 'is invalid'}`;
}

function errorTag(error: unknown): string {
  if (error instanceof EngineError) return error.code;
  if (error && typeof error === 'object' && 'code' in error && typeof error.code === 'string')
    return error.code;
  return error instanceof Error ? error.name : typeof error;
}

async function replies(app: FastifyInstance): Promise<void> {
  app.setNotFoundHandler((_request, reply) => sendNotFound(reply));

  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (error.validation) return sendBadRequest(reply, validationReason(error));
    const code = error.code;
    // Fastify answers these 413/415; the specification's Errors table has one status for a
    // malformed or rejected body: 400 `{ error }`.
    if (code && CLIENT_ERRORS[code]) return sendBadRequest(reply, CLIENT_ERRORS[code]);
    if (
      code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
      (error instanceof SyntaxError && error.statusCode === 400)
    ) {
      return sendBadRequest(reply, 'malformed JSON body');
    }
    if (error.statusCode === 429) return sendRateLimited(reply);
    if (
      isStateError(error) ||
      (error instanceof EngineError && error.code === 'ERR_ENGINE_STATE_UNAVAILABLE')
    ) {
      // Specification "Errors": 502 when an admin route could not read the engine's state.
      request.log.error({ requestId: request.id, fault: error.code }, 'state unavailable');
      return sendStateUnavailable(reply);
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500 && error.statusCode !== 401) {
      // Other client errors Fastify raises: malformed or rejected input, so 400 with a generic
      // body (the specification's Errors table has no 413 or 415).
      return sendBadRequest(reply, 'rejected request');
    }
    request.log.error({ requestId: request.id, fault: errorTag(error) }, 'unhandled fault');
    return sendInternalError(reply, String(request.id));
  });
}

export default fp(replies, { name: 'coffer-replies', fastify: '5.x' });
