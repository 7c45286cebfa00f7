/**
 * Worker-thread entry of the `sqlite` connector: runs the capture (sqlite-capture.ts) off the main
 * thread, because better-sqlite3 is synchronous and a large VACUUM INTO or table dump would stall
 * the engine's event loop (HTTP, the scheduler, other runs) for its whole duration.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { captureDatabase } from './sqlite-capture.ts';

const { sourcePath, dir } = workerData as { sourcePath: string; dir: string };
parentPort?.postMessage(captureDatabase(sourcePath, dir));
