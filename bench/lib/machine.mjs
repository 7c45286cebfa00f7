// What about this machine bears on a benchmark's figures, printed beside them.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const read = (p) => {
  try {
    return readFileSync(p, 'utf8').trim();
  } catch {
    return null;
  }
};

/**
 * Notes on the machine, one line each (none on most machines): for each running kdamond whose
 * first context has a `pageout` scheme (seen on this project's VMs: file pages not touched for
 * about a minute are reclaimed even with gigabytes free), a warning that data sets and
 * repositories may be read from disk rather than the page cache, for every tool alike, which makes
 * throughput figures lower and noisier. The CPU count is printed by each bench itself.
 */
export function machineNotes() {
  const notes = [];
  const damon = '/sys/kernel/mm/damon/admin/kdamonds';
  let dirs = [];
  try {
    dirs = readdirSync(damon).filter((d) => /^\d+$/.test(d));
  } catch {}
  for (const d of dirs) {
    if (read(join(damon, d, 'state')) !== 'on') continue;
    const ctx = join(damon, d, 'contexts', '0');
    const schemes = Number(read(join(ctx, 'schemes', 'nr_schemes')) ?? 0);
    for (let s = 0; s < schemes; s++) {
      if (read(join(ctx, 'schemes', String(s), 'action')) !== 'pageout') continue;
      const aggrUs = Number(read(join(ctx, 'monitoring_attrs', 'intervals', 'aggr_us')) ?? 0);
      const minAge = Number(read(join(ctx, 'schemes', String(s), 'access_pattern', 'age', 'min')) ?? 0);
      const after = aggrUs > 0 && minAge > 0 ? ` after ~${Math.round((aggrUs * minAge) / 1e6)} s unused` : '';
      notes.push(
        `note: kernel DAMON pageout scheme active (kdamond ${d}): file pages are reclaimed${after} even with memory free, so inputs may be re-read from disk`,
      );
    }
  }
  return notes;
}
