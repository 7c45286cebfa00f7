// The engine on PostgreSQL (ENGINE_DATABASE_URL): the same jobs flow against a real server on
// loopback, and the status reply naming the backend without the URL's password.
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

t.test('jobs on PostgreSQL', async (t) => {
  const url = await postgresUrl();
  const engine = await startEngine(t, { ENGINE_DATABASE_URL: url });
  const post = (path: string, body: unknown) =>
    http(`${engine.url}/admin${path}`, { headers: bearer(), body });
  const job = { id: 'pg-docs', cadenceSeconds: 3600, source: { type: 'files', path: '/some/dir' } };
  t.equal((await post('/jobs', job)).json().configRev, 1);
  const moved = await post('/jobs', { ...job, cadenceSeconds: 60, ifMatchRev: 0 });
  t.equal(moved.status, 409);
  t.equal(moved.json().precondition.reason, 'base-moved');
  const list = await http(`${engine.url}/admin/jobs`, { headers: bearer() });
  t.same(
    list.json().jobs.map((j: { id: string }) => j.id),
    ['pg-docs'],
  );
  const status = await http(`${engine.url}/admin/status`, { headers: bearer() });
  t.equal(status.json().database, 'postgres');
  const password = new URL(url).password;
  if (password) t.notOk(status.text.includes(password), 'no password in the status reply');
  t.equal((await post('/jobs/delete', { id: 'pg-docs', ifMatchRev: 1 })).json().deletedRev, 1);
});
