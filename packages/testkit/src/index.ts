/**
 * @coffer/testkit: private helpers that give tests real components on loopback (temporary
 * directories, PostgreSQL, an S3-compatible store, Redis). A server comes from the settings file
 * `.test-services/<name>.env` written by `scripts/services/<name>.sh start`; when that file is
 * absent the helper tries to start the server itself. With CI=true a missing server is a test
 * failure, never a skip.
 */

export { labelledBytes } from './bytes.ts';
export { chromiumPath } from './chromium.ts';
export { type HttpsRoute, type HttpsRouteServer, startHttpsRouteServer } from './https-routes.ts';
export { markdownCells, markdownTable } from './markdown.ts';
export { makeTestPki, type TestPki } from './pki.ts';
export * from './postgres.ts';
export { countReads, type ReadCounts } from './read-counts.ts';
export { runReadmeExample } from './readme-example.ts';
export * from './redis.ts';
export * from './s3.ts';
export { SoftAuthenticator, type Tweaks as AuthenticatorTweaks } from './soft-authenticator.ts';
export { readServiceEnv, repoRoot, tempDir } from './tmp.ts';
export { steadyWorkerThreads, waitForWorkerThreads, workerThreadCount } from './worker-threads.ts';
