// The repository suite on PostgreSQL: the real loopback server (scripts/services/postgres.sh), a
// fresh database per test. With CI=true a missing server fails the test (testkit throws).
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { openState, type State } from '../src/index.ts';
import { repositorySuite } from './suite.ts';

repositorySuite(t, async (t) => {
  const url = await postgresUrl();
  const dataDir = tempDir(t, 'coffer-state-pg-');
  const opened: State[] = [];
  t.teardown(async () => {
    for (const s of opened) await s.close();
  });
  return {
    backend: 'postgres',
    options: { url, dataDir },
    async open(extra = {}) {
      const s = await openState({ url, dataDir, poolMax: 4, ...extra });
      opened.push(s);
      t.equal(s.backend, 'postgres');
      return s;
    },
  };
});
