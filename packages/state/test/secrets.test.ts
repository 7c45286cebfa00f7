// Plants a marker secret (as a connection-string password, a stored value, a rejected verifier)
// and drives the error paths: the marker must never appear in any StateError's message, stack,
// inspection or JSON, nor in a State's description.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { openState, StateError } from '../src/index.ts';

const MARKER = 'Mk7ZqSecretMarker0xC0FFEE';

function clean(t: Test, e: unknown, what: string): void {
  t.ok(e instanceof StateError, `${what}: a StateError`);
  const texts = [String(e), (e as Error).stack ?? '', inspect(e, { depth: 5 }), JSON.stringify(e) ?? ''];
  t.notOk(
    texts.some((x) => x.includes(MARKER)),
    `${what}: marker absent (${(e as StateError).code})`,
  );
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  return new Error('expected a failure');
}

t.test('connection strings never leak', async (t) => {
  const real = new URL(await postgresUrl());
  const wrongPassword = new URL(real);
  wrongPassword.password = MARKER;
  const e1 = await caught(openState({ url: wrongPassword.toString(), dataDir: tempDir(t) }));
  clean(t, e1, 'wrong password');
  t.equal((e1 as StateError).code, 'ERR_STATE_UNAVAILABLE');
  t.equal((e1 as StateError).driverCode, '28P01', 'authentication failure kept as SQLSTATE only');

  const refused = await caught(
    openState({ url: `postgres://coffer:${MARKER}@127.0.0.1:1/db`, dataDir: tempDir(t) }),
  );
  clean(t, refused, 'refused connection');
  t.equal((refused as StateError).code, 'ERR_STATE_UNAVAILABLE');

  const scheme = await caught(
    openState({ url: `mysql://coffer:${MARKER}@127.0.0.1/db`, dataDir: tempDir(t) }),
  );
  clean(t, scheme, 'unsupported scheme');
  t.equal((scheme as StateError).code, 'ERR_STATE_INVALID');

  const garbage = await caught(
    openState({ url: `postgres://coffer:${MARKER}@[::zz/db`, dataDir: tempDir(t) }),
  );
  clean(t, garbage, 'unparseable URL');

  const s = await openState({ url: real.toString(), dataDir: tempDir(t) });
  t.notOk(s.description.includes(real.password), 'description carries no password');
  t.equal(s.description, `postgres://${real.host}${real.pathname}`, 'description is host and database only');
  await s.close();
  clean(t, await caught(s.jobs.list()), 'closed store');
});

t.test('stored values and rejected secrets never leak', async (t) => {
  const dataDir = tempDir(t);
  const s = await openState({ dataDir });
  t.teardown(() => s.close());
  t.notOk(s.description.includes(MARKER));
  await s.jobs.upsert({ id: 'j', source: { type: 's3', secretAccessKey: MARKER } });
  await s.jobs.upsert({ id: 'j', source: { type: 's3', secretAccessKey: `${MARKER}2` } });
  for (const [what, p] of [
    ['base-moved', s.jobs.upsert({ id: 'j', token: MARKER }, { ifMatchRev: 1 })],
    ['already-exists', s.jobs.upsert({ id: 'j', token: MARKER }, { ifMatchRev: null })],
    ['unreadable', s.jobs.upsert({ id: 'j', token: MARKER }, { ifMatchRev: MARKER as never })],
    ['not JSON', s.jobs.upsert({ id: 'x', token: MARKER, big: 1n } as never)],
    [
      'verifier',
      s.credentials.replace({
        scope: 'metrics',
        clientId: 'dpc_x',
        verifier: `dps_${MARKER}`,
        grantedBy: null,
        grantedAt: 'a',
        expiresAt: 'b',
      }),
    ],
    [
      'audit invariant',
      s.audit.append(() => ({
        seq: 5,
        ts: 'x',
        prevHash: MARKER,
        hash: MARKER,
        action: 'a',
        event: { MARKER },
      })),
    ],
    [
      'run conflict',
      s.runs.start({ id: 'r', jobId: MARKER }).then(() => s.runs.start({ id: 'r', jobId: MARKER })),
    ],
  ] as const) {
    clean(t, await caught(p), what);
  }
  const dup = await caught(
    s.sessions
      .create({ id: 'h', subject: MARKER, email: null, method: 'm', expiresAt: 'z', data: {} })
      .then(() =>
        s.sessions.create({
          id: 'h',
          subject: MARKER,
          email: null,
          method: 'm',
          expiresAt: 'z',
          data: { MARKER },
        }),
      ),
  );
  clean(t, dup, 'duplicate session');
  t.equal((dup as StateError).code, 'ERR_STATE_CONFLICT');

  const notDir = join(tempDir(t), `file-${MARKER}`);
  writeFileSync(notDir, 'x');
  const e = await caught(openState({ dataDir: notDir }));
  t.equal((e as StateError).code, 'ERR_STATE_UNAVAILABLE');
  t.ok(e instanceof StateError);
});
