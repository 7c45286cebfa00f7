// The README's example runs as written and prints what its comments say.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runReadmeExample } from '@coffer/testkit';
import t from 'tap';

t.test('the example prints what its comments say', async (t) => {
  const r = runReadmeExample(join(dirname(fileURLToPath(import.meta.url)), '..'), '## Example');
  t.same(r.expected, [
    '1.4.0',
    'true ERR_UPDATE_SEQUENCE_ROLLBACK',
    'ERR_UPDATE_EXPIRED',
    'verify-artefact',
    'refused ERR_UPDATE_BELOW_FLOOR',
  ]);
  t.equal(r.status, 0, r.stderr);
  t.same(r.printed, r.expected);
});
