/**
 * Issue #13 item 12: the source listing cap is a per-job setting (`maxEntries`, default 2,000,000,
 * at most 100,000,000). A job whose source lists more entries than its cap fails with the
 * documented reason (`source listing exceeded the page cap (...)`) before anything is sealed; the
 * same source under a cap it fits in backs up. Out-of-range values are refused at upsert.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { DEFAULT_MAX_ENTRIES } from '../../src/runs/executor.ts';
import { REASON_PAGE_CAP } from '../../src/runs/reasons.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';

t.test(
  'a job with a small maxEntries fails with the listing-cap reason; one that fits backs up',
  async (t) => {
    const dir = tempDir(t, 'coffer-max-entries-');
    writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
    const src = join(dir, 'src');
    mkdirSync(src);
    for (let i = 0; i < 450; i++) writeFileSync(join(src, `f${i}`), `file ${i}`);
    const { url, app } = await startEngine(t, { ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.pub') });
    const post = (path: string, body: unknown) => http(`${url}/admin${path}`, { headers: bearer(), body });
    const job = (maxEntries?: number) => ({
      id: 'capped',
      cadenceSeconds: 3600,
      source: { type: 'files', path: src },
      ...(maxEntries === undefined ? {} : { maxEntries }),
    });

    for (const bad of [0, -1, 1.5, 100_000_001, '10'])
      t.equal((await post('/jobs', job(bad as number))).status, 400, `maxEntries ${bad} refused`);

    const saved = await post('/jobs', job(300));
    t.equal(saved.status, 200, saved.text);
    t.equal(saved.json().job.maxEntries, 300, 'stored and echoed');
    const listed = (await http(`${url}/admin/jobs`, { headers: bearer() })).json().jobs[0];
    t.equal(listed.maxEntries, 300, 'listed');
    const failed = (await post('/trigger', { id: 'capped' })).json().runId as string;
    await app.runs.idle();
    t.match(await app.state.runs.get(failed), {
      status: 'failed',
      reason: REASON_PAGE_CAP,
      detail: { code: 'ERR_SOURCE_LISTING_OVER_CAP' },
    });

    t.equal((await post('/jobs', job(450))).status, 200);
    const ok = (await post('/trigger', { id: 'capped' })).json().runId as string;
    await app.runs.idle();
    t.match(await app.state.runs.get(ok), { status: 'ok', records: 450 }, 'exactly at the cap backs up');

    t.equal((await post('/jobs', job())).status, 200);
    t.equal(DEFAULT_MAX_ENTRIES, 2_000_000, 'the documented default');
    const dflt = (await post('/trigger', { id: 'capped' })).json().runId as string;
    await app.runs.idle();
    t.match(await app.state.runs.get(dflt), { status: 'ok' }, 'no maxEntries: the default applies');
  },
);
