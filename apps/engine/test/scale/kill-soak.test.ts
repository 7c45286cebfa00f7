/**
 * The kill soak in CI (issue 23): `bench/soak.mjs` for one minute, small data. Three replicas of
 * the built engine (dist/main.js) on a fresh PostgreSQL database and a fresh radosgw bucket; a
 * replica holding a run lock is SIGKILLed every few seconds and stays down until another replica
 * took its run over. The script checks the invariants itself (every run ok or classified with a
 * reason of the closed list, nothing committed twice, every manifest signed, every ok run verified
 * offline with the break-glass key by coffer-recover, the audit chain verified) and writes a JSON
 * summary; this test asserts on that summary. No timing is asserted: the figures are printed.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, tempDir } from '@coffer/testkit';
import t from 'tap';

const root = repoRoot();

interface Summary {
  ok: boolean;
  invariants: { name: string; ok: boolean; detail: string }[];
  figures: {
    runs: number;
    byState: Record<string, number>;
    kills: number;
    killsHoldingRun: number;
    takeovers: number;
    medianTakeoverSeconds: number | null;
  };
}

t.test('one minute of SIGKILLs on three replicas keeps every invariant', async (t) => {
  for (const f of ['apps/engine/dist/main.js', 'apps/recover/dist/cli.js'])
    t.ok(existsSync(join(root, f)), `${f} is built (pnpm build)`);
  const dir = tempDir(t, 'coffer-soak-');
  const result = join(dir, 'result.json');
  // Its own process group: the teardown ends the soak and every replica it started, even when
  // the test fails or times out half way.
  const child = spawn(process.execPath, [join(root, 'bench/soak.mjs')], {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      SOAK_SECONDS: '60',
      SOAK_REPLICAS: '3',
      SOAK_JOBS: '3',
      SOAK_TRIGGERED: '2',
      SOAK_JOB_MIB: '1',
      SOAK_FILES: '12',
      // About 20 runs: each is verified offline at the end (about 1.5 s of coffer-recover each).
      SOAK_TRIGGER_GAP: '6',
      SOAK_KILL_EVERY: '4',
      SOAK_HOLDER_WAIT: '10',
      // A killed lock holder stays down until another replica took its run over, so every kill
      // that lands on a run in flight is a takeover (a quick restart would take the run back).
      SOAK_QUICK_SHARE: '0',
      SOAK_SETTLE_SECONDS: '90',
      SOAK_DIR: join(dir, 'work'),
      SOAK_KEEP: '1',
      SOAK_RESULT: result,
    },
  });
  let output = '';
  child.stdout.on('data', (c) => {
    output += c;
  });
  child.stderr.on('data', (c) => {
    output += c;
  });
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  const code = await exited;
  t.comment(output.split('\n').slice(-30).join('\n'));
  t.ok(existsSync(result), 'the soak wrote its summary');
  const summary = JSON.parse(readFileSync(result, 'utf8')) as Summary;
  for (const i of summary.invariants) t.ok(i.ok, `${i.name}: ${i.detail}`);
  t.equal(code, 0, 'the soak exits 0 when every invariant holds');
  t.ok(summary.ok);
  t.ok(summary.figures.kills >= 1, 'at least one replica was SIGKILLed');
  t.ok(summary.figures.killsHoldingRun >= 1, 'at least one kill hit a replica holding a run');
  t.ok((summary.figures.byState.ok ?? 0) >= 1, 'at least one run is ok');
  t.ok(summary.figures.takeovers >= 1, 'at least one run was taken over by another replica');
});
