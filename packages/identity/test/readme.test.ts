// The README's examples run as written and print what their comments say.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runReadmeExample } from '@coffer/testkit';
import t from 'tap';

t.test('the example prints what its comments say', async (t) => {
  const r = runReadmeExample(join(dirname(fileURLToPath(import.meta.url)), '..'), '## Example');
  t.same(r.expected, ['true', 'passkey:ada@example.org', 'true', '1']);
  t.equal(r.status, 0, r.stderr);
  t.same(r.printed, r.expected);
});

t.test('the SAML example prints what its comments say', async (t) => {
  const r = runReadmeExample(join(dirname(fileURLToPath(import.meta.url)), '..'), '## SAML sign-in');
  t.same(r.expected, ['saml:acme:https://idp.example.org/metadata#c0ffee-0001', 'true']);
  t.equal(r.status, 0, r.stderr);
  t.same(r.printed, r.expected);
});
