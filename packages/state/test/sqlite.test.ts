// The repository suite on SQLite: a real database file in a temp dir per test.
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { openState, type State } from '../src/index.ts';
import { repositorySuite } from './suite.ts';

repositorySuite(t, async (t) => {
  const dataDir = tempDir(t, 'coffer-state-');
  const opened: State[] = [];
  t.teardown(async () => {
    for (const s of opened) await s.close();
  });
  return {
    backend: 'sqlite',
    options: { dataDir },
    async open(extra = {}) {
      const s = await openState({ dataDir, ...extra });
      opened.push(s);
      t.equal(s.backend, 'sqlite');
      return s;
    },
  };
});
