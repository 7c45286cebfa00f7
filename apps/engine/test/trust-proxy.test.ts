// ENGINE_TRUST_PROXY: without it a client's X-Forwarded-For is ignored, so rotating the header does
// not escape the per-address limit on recovery-code sign-in (10 per 15 minutes); with the console's
// address named, each forwarded browser address is counted on its own (the console replaces any
// X-Forwarded-For a browser sends: apps/console/test/proxy.test.ts). Bad values stop the start.
import t from 'tap';
import { loadConfig } from '../src/config.ts';
import { http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

async function attempts(url: string, n: number, forwardedFor: (i: number) => string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await http(`${url}/admin/auth/recovery`, {
      headers: { origin: CONSOLE, 'x-forwarded-for': forwardedFor(i) },
      body: { email: `nobody${i}@example.org`, code: 'wrong-code' },
    });
    statuses.push(r.status);
  }
  return statuses;
}

t.test('no trusted proxy: a rotated X-Forwarded-For does not escape the address limit', async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE });
  const statuses = await attempts(engine.url, 11, (i) => `198.51.100.${i + 1}`);
  t.same(statuses.slice(0, 10), Array(10).fill(401), 'ten refused sign-ins');
  t.equal(statuses[10], 429, 'the eleventh from the same peer is limited whatever the header says');
});

t.test('the console trusted: each forwarded browser address has its own limit', async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE, ENGINE_TRUST_PROXY: '127.0.0.1' });
  const one = await attempts(engine.url, 11, () => '198.51.100.7');
  t.equal(one[10], 429, 'one browser behind the console is limited after ten');
  const other = await attempts(engine.url, 1, () => '198.51.100.8');
  t.equal(other[0], 401, 'another browser behind the same console is not');
});

t.test('ENGINE_TRUST_PROXY values', async (t) => {
  const base = { ENGINE_DATA_DIR: '/tmp/x', ADMIN_TOKEN: 'a'.repeat(32) };
  t.same(loadConfig({ ...base }).trustProxy, []);
  t.same(loadConfig({ ...base, ENGINE_TRUST_PROXY: '127.0.0.1, 10.0.0.0/8,::1,fd00::/8' }).trustProxy, [
    '127.0.0.1',
    '10.0.0.0/8',
    '::1',
    'fd00::/8',
  ]);
  for (const bad of ['localhost', '10.0.0.0/33', '1.2.3.4/8/9', '::1/129', 'true', '*'])
    t.throws(() => loadConfig({ ...base, ENGINE_TRUST_PROXY: bad }), /ENGINE_TRUST_PROXY/, bad);
});
