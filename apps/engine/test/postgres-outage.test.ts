import { mkdirSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { provisionKeys, startBuiltEngine } from './helpers/built-engine.ts';
import { bearer, http } from './helpers/engine.ts';

/** A loopback TCP relay to `target` that can be cut (every connection dropped, port closed) and reopened. */
async function relay(target: { host: string; port: number }) {
  const sockets = new Set<Socket>();
  let server: Server | null = null;
  let port = 0;
  const open = () =>
    new Promise<void>((resolve) => {
      const s = createServer((client) => {
        const upstream = connect(target.port, target.host);
        for (const x of [client, upstream]) {
          sockets.add(x);
          x.on('close', () => sockets.delete(x));
          x.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
      });
      server = s;
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as { port: number }).port;
        resolve();
      });
    });
  const cut = () =>
    new Promise<void>((resolve) => {
      for (const x of sockets) x.destroy();
      if (server === null || !server.listening) return resolve();
      server.close(() => resolve());
    });
  await open();
  return { port: () => port, cut, open };
}

t.test(
  'PostgreSQL unreachable: the replica survives, sessions get 502, /ready 200, service returns',
  async (t) => {
    const dir = tempDir(t, 'coffer-outage-');
    const keys = provisionKeys(dir);

    const db = new URL(await postgresUrl());
    const r = await relay({ host: db.hostname, port: Number(db.port || 5432) });
    t.teardown(() => r.cut());
    const viaRelay = new URL(db);
    viaRelay.hostname = '127.0.0.1';
    viaRelay.port = String(r.port());
    const engine = await startBuiltEngine(t, {
      ENGINE_DATA_DIR: join(dir, 'replica'),
      ENGINE_DATABASE_URL: viaRelay.toString(),
      ...keys,
    });
    const source = join(dir, 'source');
    mkdirSync(source);
    const job = { id: 'docs', cadenceSeconds: 86_400, source: { type: 'files', path: source } };
    t.equal((await http(`${engine.url}/admin/jobs`, { headers: bearer(), body: job })).status, 200);
    const boot = await http(`${engine.url}/admin/session/bootstrap`, { method: 'POST', headers: bearer() });
    const cookie = boot.headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))
      ?.split(';')[0];
    t.ok(cookie, 'a session from the admin token');
    const session = { cookie: cookie ?? '' };
    t.equal((await http(`${engine.url}/admin/jobs`, { headers: session })).status, 200);

    await r.cut();
    const down = await http(`${engine.url}/admin/jobs`, { headers: session });
    t.equal(down.status, 502, 'an admin read by a session while the database is unreachable');
    t.same(down.json(), { error: 'state unavailable' });
    const token = await http(`${engine.url}/admin/jobs`, { headers: bearer() });
    t.equal(token.status, 401, 'the bare admin token fails closed (its retire latch is unreadable)');
    t.equal((await http(`${engine.url}/ready`)).status, 200, '/ready reads no state');
    t.equal(engine.child.exitCode, null, 'the replica is still running');

    await r.open();
    let back = await http(`${engine.url}/admin/jobs`, { headers: session });
    // The pool may first hand out a connection that died with the relay.
    for (let i = 0; i < 20 && back.status !== 200; i++) {
      await new Promise((res) => setTimeout(res, 250));
      back = await http(`${engine.url}/admin/jobs`, { headers: session });
    }
    t.equal(back.status, 200, 'served again once the database is back');
    t.same(
      back.json().jobs.map((j: { id: string }) => j.id),
      ['docs'],
      'nothing was lost',
    );
  },
);
