#!/usr/bin/env node
// Build step: writes the engine's route snapshot (paths, methods, summaries, operation ids, tags;
// no schemas) to openapi/engine.json from the built route definitions. test/openapi.test.ts
// fails when the committed file is stale.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { routeSnapshot, snapshotText } from '../dist/openapi.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
mkdirSync(join(root, 'openapi'), { recursive: true });
writeFileSync(join(root, 'openapi', 'engine.json'), snapshotText(await routeSnapshot()));
