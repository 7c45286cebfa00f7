// The README's files-writer example runs as written and prints what its comments say.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runReadmeExample } from '@coffer/testkit';
import t from 'tap';

t.test('the files writer example prints what its comments say', async (t) => {
  const r = runReadmeExample(
    join(dirname(fileURLToPath(import.meta.url)), '..'),
    '#### The files writer on its own',
  );
  t.same(r.expected, ['hello', 'file', 'dot-dot-segment', 'ERR_SOURCE_TARGET_EXISTS']);
  t.equal(r.status, 0, r.stderr);
  t.same(r.printed, r.expected);
});
