/**
 * `EngineFacts`: the core facts the `coffer-core` plugin (plugins/core.ts) decorates the instance
 * with, as a type for the modules that take them as an argument (the support bundle, the metrics)
 * rather than the whole instance. A FastifyInstance is one.
 */
import type { FastifyInstance } from 'fastify';

export type EngineFacts = Pick<FastifyInstance, 'config' | 'keys' | 'state' | 'destinations' | 'startedAt'>;
