// The committed golden archives of formats 0.1 and 0.2 (packages/archive/test/fixtures/golden-0.1
// and golden-0.2, named by docs/archive-format.md §10 and §12.12 as what every release must read)
// through the real CLI. The 0.2 one is a two-run chain: its second run reads packs of the first.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeKeyFile, fingerprint } from '@coffer/crypto';
import { repoRoot, tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { cliArgs, runCli } from './helpers.ts';

for (const line of ['0.1', '0.2']) {
  t.test(`coffer-recover reads the golden ${line} archive`, (t) => readsGolden(t, line));
}

async function readsGolden(t: Test, line: string): Promise<void> {
  const GOLDEN = join(repoRoot(), 'packages', 'archive', 'test', 'fixtures', `golden-${line}`);
  const store = join(GOLDEN, 'store');
  const keys = join(GOLDEN, 'keys');
  const pin = fingerprint(decodeKeyFile(readFileSync(join(keys, 'signer.pub'), 'utf8'), 'signer-public').key);
  const list = await runCli(cliArgs('inspect', { from: store }, '--json', '--pin-signer', pin));
  t.equal(list.code, 0, list.stderr);
  const runs = JSON.parse(list.stdout).runs as {
    runId: string;
    job: string;
    check: { status: string };
    formatVersion: string;
  }[];
  t.ok(runs.length >= 1, 'at least one run');
  for (const run of runs) {
    t.equal(run.check.status, 'ok', `${run.runId} manifest ok`);
    t.equal(run.formatVersion.slice(0, 4), `${line}.`);
    for (const key of ['break-glass.key', 'operational.key']) {
      const v = await runCli(
        cliArgs(
          'verify',
          { from: store, job: run.job, run: run.runId, key: join(keys, key) },
          '--pin-signer',
          pin,
        ),
      );
      t.equal(v.code, 0, `verify ${run.runId} with ${key}: ${v.stderr}`);
    }
    const out = tempDir(t, 'coffer-recover-golden-');
    const x = await runCli(
      cliArgs(
        'extract',
        { from: store, job: run.job, run: run.runId, key: join(keys, 'break-glass.key'), to: out },
        '--json',
        '--pin-signer',
        pin,
      ),
    );
    t.equal(x.code, 0, x.stderr);
    const doc = JSON.parse(x.stdout) as { written: { path: string; sha384: string }[] };
    t.ok(doc.written.length > 0);
    for (const w of doc.written) {
      const digest = `sha384:${createHash('sha384').update(readFileSync(w.path)).digest('hex')}`;
      t.equal(digest, w.sha384, `${w.path.slice(out.length)} matches its SHA-384`);
    }
  }
}
