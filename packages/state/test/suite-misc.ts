/** Settings, roles, sessions, approvals, credentials, notifications, update state, migrations. */
import type { Test } from 'tap';
import { openState } from '../src/index.ts';
import { clock, failsWith, type MakeTarget } from './suite.ts';

const VERIFIER = 'ab'.repeat(48);

export async function miscSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('settings and update state', async (t) => {
    const s = await (await makeTarget(t)).open();
    t.equal(await s.settings.get('restore.approval'), undefined);
    await s.settings.set('restore.approval', { enabled: true });
    t.same(await s.settings.get('restore.approval'), { enabled: true });
    t.equal(await s.settings.setIfAbsent('adminToken.retired', { at: 'x' }), true, 'latch set');
    t.equal(await s.settings.setIfAbsent('adminToken.retired', { at: 'y' }), false, 'latch never resets');
    t.same(await s.settings.get('adminToken.retired'), { at: 'x' });
    await s.settings.set('first_start.keys', true);
    await s.settings.set('firstXstart', 1);
    t.same(
      (await s.settings.list('first_')).map((e) => e.key),
      ['first_start.keys'],
      'prefix is literal (no LIKE wildcards)',
    );
    t.equal(await s.settings.delete('first_start.keys'), true);
    t.equal(await s.settings.delete('first_start.keys'), false);
    await s.updates.set('settledVersion', '0.3.6');
    t.equal(await s.updates.get('settledVersion'), '0.3.6');
    t.same(
      (await s.updates.list()).map((e) => e.key),
      ['settledVersion'],
    );
    t.equal(await s.settings.get('settledVersion'), undefined, 'separate tables');
  });

  t.test('roles and custom roles', async (t) => {
    const s = await (await makeTarget(t)).open();
    await s.roles.assign({ subject: 'iss|1', role: 'owner', email: 'a@x', grantedBy: null });
    await s.roles.assign({ subject: 'iss|2', role: 'operator', email: null, grantedBy: 'a@x' });
    await s.roles.assign({ subject: 'iss|2', role: 'owner', email: 'b@x', grantedBy: 'a@x' });
    t.equal((await s.roles.get('iss|2'))?.role, 'owner', 'assign replaces');
    t.equal(await s.roles.count('owner'), 2);
    t.equal(await s.roles.remove('iss|2'), true);
    t.equal(await s.roles.get('iss|2'), null);
    t.same(
      (await s.roles.list()).map((r) => r.subject),
      ['iss|1'],
    );
    await s.roles.putCustomRole({
      name: 'auditor',
      base: 'viewer',
      capabilities: ['audit.read'],
      description: null,
    });
    await s.roles.putCustomRole({
      name: 'auditor',
      base: 'viewer',
      capabilities: ['audit.read', 'reports.read'],
      description: 'd',
    });
    t.same((await s.roles.getCustomRole('auditor'))?.capabilities, ['audit.read', 'reports.read']);
    t.equal((await s.roles.listCustomRoles()).length, 1);
    await failsWith(
      t,
      s.roles.putCustomRole({ name: 'x', base: 'viewer', capabilities: [1] as never, description: null }),
      'ERR_STATE_INVALID',
      'capabilities must be names',
    );
    t.equal(await s.roles.deleteCustomRole('auditor'), true);
    t.equal(await s.roles.getCustomRole('auditor'), null);
  });

  t.test('sessions expire by the injected clock', async (t) => {
    const c = clock();
    const s = await (await makeTarget(t)).open({ now: c.now });
    const exp = new Date(c.now().getTime() + 60_000).toISOString();
    await s.sessions.create({
      id: 'h1',
      subject: 'iss|1',
      email: null,
      method: 'access',
      expiresAt: exp,
      data: {},
    });
    await s.sessions.create({
      id: 'h2',
      subject: 'iss|1',
      email: null,
      method: 'passkey',
      expiresAt: exp,
      data: { a: 1 },
    });
    await s.sessions.create({
      id: 'h3',
      subject: 'iss|2',
      email: null,
      method: 'passkey',
      expiresAt: exp,
      data: {},
    });
    t.same((await s.sessions.get('h2'))?.data, { a: 1 });
    await failsWith(
      t,
      s.sessions.create({ id: 'h1', subject: 'x', email: null, method: 'm', expiresAt: exp, data: {} }),
      'ERR_STATE_CONFLICT',
      'duplicate session id',
    );
    t.equal(await s.sessions.deleteForSubject('iss|1'), 2);
    c.advance(60_000);
    t.equal(await s.sessions.get('h3'), null, 'expired sessions are not returned');
    t.equal(await s.sessions.purgeExpired(), 1);
    t.equal(await s.sessions.delete('h3'), false);
  });

  t.test('approvals: life-cycle and single consumption across two instances', async (t) => {
    const target = await makeTarget(t);
    const a = await target.open();
    const b = await target.open();
    const ap = await a.approvals.create({
      id: 'ap1',
      kind: 'restore',
      subjectHash: 'sha384:plan',
      requestedBy: 'iss|1',
      detail: { plannedAt: '2030-01-01T00:00:00.000Z' },
    });
    t.equal(ap.status, 'pending');
    await failsWith(
      t,
      a.approvals.create({ id: 'ap1', kind: 'restore' }),
      'ERR_STATE_CONFLICT',
      'duplicate id',
    );
    const approved = await b.approvals.transition('ap1', ['pending'], 'approved', {
      by: 'iss|2',
      byEmail: 'b@x',
    });
    t.equal(approved?.decidedBy, 'iss|2');
    t.ok(approved?.decidedAt);
    t.equal(await a.approvals.transition('ap1', ['pending'], 'rejected'), null, 'no longer pending');
    const consumed = await Promise.all([
      a.approvals.transition('ap1', ['approved'], 'consumed', { detail: { by: 'a' } }),
      b.approvals.transition('ap1', ['approved'], 'consumed', { detail: { by: 'b' } }),
    ]);
    t.equal(consumed.filter((r) => r !== null).length, 1, 'consumed exactly once');
    const after = await a.approvals.get('ap1');
    t.equal(after?.status, 'consumed');
    t.equal(after?.detail.plannedAt, '2030-01-01T00:00:00.000Z', 'detail merged, not replaced');
    t.equal(after?.decidedBy, 'iss|2', 'a transition without a decider keeps the decision');
    await a.approvals.create({ id: 'ap2', kind: 'config-change' });
    t.same(
      (await a.approvals.list({ kind: 'restore' })).map((r) => r.id),
      ['ap1'],
    );
    t.same(
      (await a.approvals.list({ status: ['pending'] })).map((r) => r.id),
      ['ap2'],
    );
    t.same(
      (await a.approvals.list({ subjectHash: 'sha384:plan' })).map((r) => r.id),
      ['ap1'],
    );
  });

  t.test('pull credentials', async (t) => {
    const s = await (await makeTarget(t)).open();
    const grant = {
      scope: 'audit-feed' as const,
      clientId: 'dpc_1',
      verifier: VERIFIER,
      grantedBy: 'a@x',
      grantedAt: '2030-01-01T00:00:00.000Z',
      expiresAt: '2030-04-01T00:00:00.000Z',
    };
    t.equal(await s.credentials.replace(grant), null);
    const old = await s.credentials.replace({ ...grant, clientId: 'dpc_2', grantedBy: null });
    t.equal(old?.clientId, 'dpc_1', 'one grant per scope: the old one is returned');
    t.equal((await s.credentials.list()).length, 1);
    for (let i = 0; i < 55; i++)
      await s.credentials.recordPull(
        'audit-feed',
        'dpc_2',
        `2030-01-01T00:00:${String(i % 60).padStart(2, '0')}.000Z`,
      );
    await s.credentials.recordPull('audit-feed', 'dpc_1', '2031-01-01T00:00:00.000Z');
    const cur = await s.credentials.get('audit-feed');
    t.equal(cur?.pulls.length, 50, 'trail keeps the last 50');
    t.equal(cur?.pulls[49], '2030-01-01T00:00:54.000Z', 'newest last; a stale client id records nothing');
    t.equal(cur?.grantedBy, null);
    await failsWith(
      t,
      s.credentials.replace({ ...grant, verifier: 'dps_secret' }),
      'ERR_STATE_INVALID',
      'not a verifier',
    );
    await failsWith(t, s.credentials.get('other' as never), 'ERR_STATE_INVALID', 'unknown scope');
    t.equal(await s.credentials.delete('audit-feed', 'dpc_1'), false, 'client id must match');
    t.equal(await s.credentials.delete('audit-feed'), true);
    t.equal(await s.credentials.get('audit-feed'), null);
  });

  t.test('notifications', async (t) => {
    const s = await (await makeTarget(t)).open();
    await s.notifications.putChannel({
      id: 'c1',
      kind: 'webhook',
      name: 'ops',
      enabled: true,
      config: { url: 'https://h/x' },
    });
    await s.notifications.putChannel({
      id: 'c1',
      kind: 'webhook',
      name: 'ops2',
      enabled: false,
      config: { url: 'https://h/y' },
    });
    const ch = await s.notifications.getChannel('c1');
    t.equal(ch?.name, 'ops2');
    t.equal(ch?.enabled, false);
    await s.notifications.putRule({
      id: 'r1',
      scope: 'global',
      rule: { events: ['backup-failure'], channelIds: ['c1'] },
    });
    t.same((await s.notifications.listRules())[0]?.rule, { events: ['backup-failure'], channelIds: ['c1'] });
    for (let i = 0; i < 3; i++) {
      await s.notifications.recordDelivery({
        event: 'backup-failure',
        severity: 'critical',
        channelKind: 'webhook',
        channelId: 'c1',
        detail: `job docs failed ${i}`,
        accepted: i !== 1,
        test: false,
      });
    }
    const d = await s.notifications.listDeliveries(2);
    t.same(
      d.map((x) => [x.seq, x.accepted]),
      [
        [3, true],
        [2, false],
      ],
      'newest first',
    );
    t.equal(await s.notifications.deleteRule('r1'), true);
    t.equal(await s.notifications.deleteChannel('c1'), true);
    t.same(await s.notifications.listChannels(), []);
  });

  t.test('migrations: idempotent on reopen, safe when several open at once', async (t) => {
    const target = await makeTarget(t);
    const opened = await Promise.all([target.open(), target.open(), target.open()]);
    await opened[0]?.jobs.upsert({ id: 'persist' });
    for (const s of opened) await s.close();
    const again = await target.open();
    t.equal((await again.jobs.get('persist'))?.configRev, 1, 'data survives reopen');
    await again.ping();
    await again.close();
    await again.close();
    await failsWith(t, again.jobs.list(), 'ERR_STATE_CLOSED', 'closed store refuses use');
    const closing = await target.open();
    const writes = Array.from({ length: 20 }, (_, i) => closing.settings.set(`k${i}`, i));
    await closing.close();
    t.equal(
      (await Promise.allSettled(writes)).filter((r) => r.status === 'fulfilled').length,
      20,
      'close lets started writes finish',
    );
    const direct = await openState({ ...target.options });
    t.equal(await direct.settings.get('k19'), 19, 'and they were committed');
    t.equal((await direct.jobs.list()).length, 1, 'a third open migrates nothing and reads the same rows');
    await direct.close();
  });
}
