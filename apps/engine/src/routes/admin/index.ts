/**
 * The `/admin/*` family: CORS for the configured console origin only, the pre-authentication
 * routes, then the authenticated scope (authentication as the scope's first onRequest hook, then
 * each route's capability gate and rate limit). Unknown admin paths: the pre-auth prefixes
 * (`/admin/auth/`, `/admin/oidc/`, `/admin/saml/`) and the test-only and demo prefixes answer a
 * plain 404 before authentication; any other unknown path is authenticated first (so the route
 * table is not disclosed to anonymous probes) and then answered the same plain 404.
 * PUT, PATCH and DELETE are never routes here, so they fall into the same 404.
 */
import cors from '@fastify/cors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendNotFound } from '../../plugins/replies.ts';
import auditRoutes from '../audit/index.ts';
import restoreRoutes from '../restore/index.ts';
import runsRoutes from '../runs/index.ts';
import supportRoutes from '../support/index.ts';
import authRoutes from './auth.ts';
import canaryRoutes from './canary.ts';
import configRoutes from './config.ts';
import connectionsRoutes from './connections.ts';
import controlPlaneRoutes from './control-plane.ts';
import healthRoute from './health.ts';
import identityRoutes from './identity.ts';
import idpRoutes from './idp.ts';
import jobsRoutes from './jobs/index.ts';
import notifyRoutes from './notify.ts';
import oidcRoutes from './oidc.ts';
import ownerActionRoutes from './owner-actions.ts';
import passkeyRoutes from './passkeys.ts';
import policyRoutes from './policy.ts';
import postureRoutes from './posture.ts';
import recoveryRoutes from './recovery.ts';
import reportRoutes from './reports.ts';
import roleRoutes from './roles.ts';
import samlRoutes from './saml.ts';
import sessionRoutes from './sessions.ts';
import setupRoutes from './setup.ts';
import statusRoutes from './status.ts';
import stepUpRoutes from './stepup.ts';
import updateRoutes from './updates.ts';

export const CORS_METHODS = ['GET', 'POST', 'OPTIONS'];
export const CORS_ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'perimeter-access-jwt-assertion',
  'x-engine-csrf',
  'x-engine-deploy-token',
  'x-engine-stepup',
];
const PRE_AUTH_PREFIXES = [
  '/admin/auth/',
  '/admin/oidc/',
  '/admin/saml/',
  '/admin/test-fault/',
  '/admin/demo/',
];

export default async function adminFamily(app: FastifyInstance): Promise<void> {
  const consoleOrigin = app.config.consoleOrigin;
  await app.register(cors, {
    // Exact match only; no wildcard, no pattern, nothing when CONSOLE_ORIGIN is unset.
    origin: (origin, cb) => cb(null, consoleOrigin !== undefined && origin === consoleOrigin),
    methods: CORS_METHODS,
    allowedHeaders: CORS_ALLOWED_HEADERS,
    credentials: true,
    maxAge: 600,
    strictPreflight: true,
    hideOptionsRoute: true,
  });

  await app.register(healthRoute);
  await app.register(authRoutes);
  await app.register(passkeyRoutes);
  await app.register(recoveryRoutes);
  await app.register(oidcRoutes);
  await app.register(samlRoutes);

  await app.register(async (authed) => {
    authed.addHook('onRequest', authed.authenticate);
    await authed.register(identityRoutes);
    await authed.register(stepUpRoutes);
    await authed.register(sessionRoutes);
    await authed.register(roleRoutes);
    await authed.register(policyRoutes);
    await authed.register(ownerActionRoutes);
    await authed.register(statusRoutes);
    await authed.register(postureRoutes);
    await authed.register(setupRoutes);
    await authed.register(jobsRoutes);
    await authed.register(configRoutes);
    await authed.register(connectionsRoutes);
    await authed.register(auditRoutes);
    await authed.register(supportRoutes);
    await authed.register(runsRoutes);
    await authed.register(restoreRoutes);
    await authed.register(notifyRoutes);
    await authed.register(idpRoutes);
    await authed.register(updateRoutes);
    await authed.register(canaryRoutes);
    await authed.register(controlPlaneRoutes);
    await authed.register(reportRoutes);
  });

  app.setNotFoundHandler(async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '';
    const neverRoute = request.method !== 'GET' && request.method !== 'POST' && request.method !== 'HEAD';
    if (neverRoute || PRE_AUTH_PREFIXES.some((p) => path.startsWith(p))) {
      return sendNotFound(reply);
    }
    await app.authenticate(request, reply);
    if (reply.sent) return reply;
    return sendNotFound(reply);
  });
}
