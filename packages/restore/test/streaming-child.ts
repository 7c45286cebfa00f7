/**
 * Child process of streaming.test.ts: runs one drill (files scratch) or one dry run of a run whose
 * only record is larger than the memory bound the parent checks, then prints its evidence or plan
 * summary and this process's peak resident set size as one JSON line.
 */

import { readFileSync } from 'node:fs';
import { decodeKeyFile } from '@coffer/crypto';
import { createFsStore } from '@coffer/objectstore';
import { planRestore, runDrill, validateRestoreRequest } from '../src/index.ts';

const [mode, destRoot, keyFile, scratchDir, runId, job] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const store = createFsStore({ root: destRoot });
const secretKey = decodeKeyFile(readFileSync(keyFile, 'utf8'), 'recipient-secret').key;
let summary: Record<string, unknown>;
if (mode === 'drill') {
  const ev = await runDrill({
    store,
    runId,
    job,
    operationalSecretKey: secretKey,
    scratch: { dir: scratchDir },
  });
  summary = {
    verdict: ev.verdict,
    reason: ev.reason,
    records: ev.records,
    matched: ev.matched,
    bytes: ev.bytes,
  };
} else {
  const plan = await planRestore({
    store,
    job,
    operationalSecretKey: secretKey,
    request: validateRestoreRequest({ runId, target: { namespaceId: scratchDir } }),
    targetResolver: () => ({ type: 'files', root: scratchDir, binding: job }),
    restoreRoots: [scratchDir],
  });
  summary = { ok: plan.ok, reason: plan.reason, recordsVerified: plan.recordsVerified, bytes: plan.bytes };
}
// maxRSS is in KiB.
process.stdout.write(
  `${JSON.stringify({ ...summary, maxRssBytes: process.resourceUsage().maxRSS * 1024 })}\n`,
);
