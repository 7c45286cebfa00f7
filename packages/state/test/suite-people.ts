/** Passkeys, recovery code verifiers and single-use tokens: the atomic steps the checks rely on. */
import type { Test } from 'tap';
import type { MakeTarget } from './suite.ts';

export async function peopleSuite(t: Test, makeTarget: MakeTarget): Promise<void> {
  t.test('passkeys: stored, listed, email bound, counter moved only from the value read', async (t) => {
    const s = await (await makeTarget(t)).open();
    const p = {
      id: 'cred-1',
      subject: 'passkey:ada@example.org',
      email: 'ada@example.org',
      publicKey: 'pQECAyYgASFYIA',
      counter: 0,
      transports: ['internal'],
    };
    const stored = await s.identity.addPasskey(p);
    t.match(stored, { ...p, usedAt: null });
    await t.rejects(
      s.identity.addPasskey({ ...p, subject: 'passkey:eve@example.org' }),
      {
        code: 'ERR_STATE_CONFLICT',
      },
      'a credential id is never rebound',
    );
    await s.identity.addPasskey({ ...p, id: 'cred-2', transports: [] });
    t.same((await s.identity.passkeysOf(p.subject)).map((x) => x.id).sort(), ['cred-1', 'cred-2']);
    t.same(await s.identity.passkeysOf('passkey:nobody@example.org'), []);
    t.equal(await s.identity.emailHasPasskey('ada@example.org'), true);
    t.equal(await s.identity.emailHasPasskey('eve@example.org'), false);
    t.equal(await s.identity.usePasskey('cred-1', 0, 5), true);
    t.equal(await s.identity.usePasskey('cred-1', 0, 6), false, 'a second sign-in with the same read loses');
    const after = await s.identity.passkey('cred-1');
    t.equal(after?.counter, 5);
    t.type(after?.usedAt, 'string');
    await t.rejects(s.identity.usePasskey('cred-1', 5, -1), { code: 'ERR_STATE_INVALID' });
    t.equal(await s.identity.removePasskey('cred-2'), true);
    t.equal(await s.identity.removePasskey('cred-2'), false);
    t.equal(await s.identity.passkey('cred-2'), null);
  });

  t.test('recovery codes: staged, promoted in one write, each used once', async (t) => {
    const s = await (await makeTarget(t)).open();
    const who = 'passkey:ada@example.org';
    const set = (tag: string) =>
      ['AAAA', 'BBBB'].map((selector) => ({ selector, hash: `${tag}-${selector}` }));
    t.equal(await s.identity.promoteRecoveryCodes(who), false, 'nothing staged');
    await s.identity.stageRecoveryCodes(who, set('one'));
    t.same(await s.identity.recoveryCodes(who), [], 'staged codes do not work yet');
    t.equal(await s.identity.promoteRecoveryCodes(who), true);
    t.same(await s.identity.recoveryCodes(who), set('one'));
    await s.identity.stageRecoveryCodes(who, set('two'));
    await s.identity.stageRecoveryCodes(who, set('three'));
    t.same(await s.identity.recoveryCodes(who), set('one'), 'the active set stays until promotion');
    t.equal(await s.identity.promoteRecoveryCodes(who), true);
    t.same(
      await s.identity.recoveryCodes(who),
      set('three'),
      'the latest staged set replaced the active one',
    );
    t.equal(await s.identity.useRecoveryCode(who, 'AAAA'), true);
    t.equal(await s.identity.useRecoveryCode(who, 'AAAA'), false, 'a code works once');
    t.same(await s.identity.recoveryCodes(who), [{ selector: 'BBBB', hash: 'three-BBBB' }]);
    t.same(await s.identity.recoveryCodes('passkey:eve@example.org'), [], 'per subject');
  });

  t.test('single-use tokens: taken once, replaced by binding, purged when expired', async (t) => {
    const target = await makeTarget(t);
    const a = await target.open();
    const b = await target.open();
    const token = (id: string, boundTo: string, expiresAt = 2_000) => ({
      id,
      purpose: 'first-owner',
      boundTo,
      verifier: `v-${id}`,
      expiresAt,
    });
    await a.identity.putToken(token('t1', 'root@example.org'));
    await a.identity.putToken(token('t2', 'root@example.org'), { replace: true });
    t.equal(await a.identity.takeToken('t1'), null, 'a new set-up link replaced the previous one');
    await a.identity.putToken(token('t3', 'other@example.org'));
    t.same(await a.identity.getToken('t3'), token('t3', 'other@example.org'), 'read without using it up');
    t.equal(await a.identity.getToken('t3', { boundTo: 'x@example.org' }), null, 'read: another binding');
    t.equal(await a.identity.takeToken('t3', { boundTo: 'x@example.org' }), null, 'another binding');
    t.equal(await a.identity.takeToken('t3', { purpose: 'invite' }), null, 'another purpose');
    const [x, y] = await Promise.all([a.identity.takeToken('t2'), b.identity.takeToken('t2')]);
    t.same(
      [x, y].filter((r) => r !== null),
      [token('t2', 'root@example.org')],
      'two engines: one wins',
    );
    await a.identity.putToken(token('t4', 'x@example.org', 1_000));
    t.equal(await a.identity.purgeTokens(1_500), 1);
    t.equal(await a.identity.takeToken('t4'), null);
    t.same(await a.identity.takeToken('t3'), token('t3', 'other@example.org'));
    await t.rejects(a.identity.putToken({ ...token('t5', 'x'), expiresAt: -1 }), {
      code: 'ERR_STATE_INVALID',
    });
  });
}
