// Recovery codes (slow hashes only, one scrypt per attempt, forgiving input) and single-use tokens
// (bound, expiring, one error for every refusal); emails, passkey subjects and the relying party.
import t from 'tap';
import {
  checkOneTimeToken,
  matchRecoveryCode,
  mintOneTimeToken,
  mintRecoveryCodes,
  normaliseEmail,
  normaliseRecoveryCode,
  oneTimeTokenId,
  passkeySubject,
  relyingPartyOf,
} from '../src/index.ts';

t.test('recovery codes: shown once, stored as scrypt verifiers, each matches only itself', async (t) => {
  const { codes, verifiers } = await mintRecoveryCodes(3);
  t.equal(codes.length, 3);
  for (const c of codes) t.match(c, /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){4}$/);
  t.equal(new Set(verifiers.map((v) => v.selector)).size, 3, 'selectors are distinct');
  for (const v of verifiers) {
    t.match(v.hash, /^scrypt\$15\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    for (const c of codes) t.notOk(v.hash.includes(c.replace(/-/g, '').slice(4)), 'no secret in a verifier');
  }
  for (let i = 0; i < codes.length; i++) t.equal(await matchRecoveryCode(codes[i], verifiers), i);
  // Forgiving input: lower case, spaces instead of dashes.
  t.equal(await matchRecoveryCode(codes[1]!.toLowerCase().replace(/-/g, ' '), verifiers), 1);
  // Right selector, wrong secret; unknown selector; junk.
  const raw = codes[0]!.replace(/-/g, '');
  const flipped = raw.slice(0, -1) + (raw.endsWith('0') ? '1' : '0');
  t.equal(await matchRecoveryCode(flipped, verifiers), -1, 'wrong secret');
  t.equal(
    await matchRecoveryCode(
      `ZZZZ${raw.slice(4)}`,
      verifiers.filter((v) => v.selector !== 'ZZZZ'),
    ),
    -1,
  );
  t.equal(await matchRecoveryCode('not a code', verifiers), -1);
  t.equal(await matchRecoveryCode(undefined, verifiers), -1);
  // A tampered verifier asking for more work is refused, not computed.
  const costly = [
    { selector: verifiers[0]!.selector, hash: verifiers[0]!.hash.replace('scrypt$15$', 'scrypt$22$') },
  ];
  t.equal(await matchRecoveryCode(codes[0], costly), -1);
  await t.rejects(mintRecoveryCodes(0), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' });
});

t.test('recovery code normalisation maps the Crockford look-alikes', async (t) => {
  t.same(normaliseRecoveryCode('abcd-efgh-jkmn-pqrs-tvwx'), { selector: 'ABCD', secret: 'EFGHJKMNPQRSTVWX' });
  t.same(normaliseRecoveryCode('0O1I-L000-0000-0000-0000')?.selector, '0011');
  t.equal(normaliseRecoveryCode('ABCD-EFGH-JKMN-PQRS-TVWU'), null, 'U is not in the alphabet');
  t.equal(normaliseRecoveryCode('ABCD'), null);
  t.equal(normaliseRecoveryCode(42), null);
});

t.test('one-time tokens: bound, single purpose, expiring, one refusal code', async (t) => {
  const now = Date.UTC(2026, 10, 25);
  const { token, record } = mintOneTimeToken({ purpose: 'invite', boundTo: 'bob@example.org', now });
  t.match(token, /^cfi_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
  t.equal(oneTimeTokenId(token, 'invite'), record.id);
  t.equal(oneTimeTokenId(token, 'first-owner'), null, 'another purpose');
  t.notOk(JSON.stringify(record).includes(token.split('.')[1]!), 'the record holds no secret');
  t.equal(record.expiresAt - now, 7 * 24 * 3600 * 1000, 'invites last 7 days');
  const expect = { purpose: 'invite' as const, boundTo: 'bob@example.org', now: now + 1000 };
  t.doesNotThrow(() => checkOneTimeToken(token, record, expect));
  const refused = (tok: unknown, rec: typeof record | null, exp: typeof expect) =>
    t.throws(() => checkOneTimeToken(tok, rec, exp), { code: 'ERR_IDENTITY_INVITE_INVALID' });
  refused(token, record, { ...expect, boundTo: 'eve@example.org' });
  refused(token, record, { ...expect, now: record.expiresAt });
  refused(`${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`, record, expect);
  refused(token, null, expect);
  refused(token, { ...record, purpose: 'first-owner' }, expect);
  refused(token.replace('cfi_', 'cfo_'), record, expect);
  refused(42, record, expect);
  const link = mintOneTimeToken({ purpose: 'first-owner', boundTo: 'root@example.org', now });
  t.equal(link.record.expiresAt - now, 24 * 3600 * 1000, 'set-up links last 24 hours');
  const step = mintOneTimeToken({ purpose: 'step-up', boundTo: 'sid-1', now });
  t.equal(step.record.expiresAt - now, 5 * 60 * 1000, 'step-up tokens last 5 minutes');
  t.throws(() => mintOneTimeToken({ purpose: 'invite', boundTo: '' }), {
    code: 'ERR_IDENTITY_INVALID_ARGUMENT',
  });
});

t.test('emails, passkey subjects and the relying party', async (t) => {
  t.equal(normaliseEmail('  Ada@Example.ORG '), 'ada@example.org');
  for (const bad of [
    '',
    'ada',
    'ada@',
    '@example.org',
    'a b@example.org',
    'ada@example',
    42,
    `${'a'.repeat(250)}@x.io`,
  ])
    t.throws(() => normaliseEmail(bad), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' }, String(bad).slice(0, 20));
  t.equal(passkeySubject('Ada@Example.org'), 'passkey:ada@example.org');
  t.same(relyingPartyOf('https://backup.example.org'), {
    id: 'backup.example.org',
    origin: 'https://backup.example.org',
    name: 'Coffer',
  });
  t.same(relyingPartyOf('http://localhost:8443').id, 'localhost', 'http on loopback');
  t.throws(() => relyingPartyOf(undefined), { code: 'ERR_IDENTITY_NOT_CONFIGURED' });
  t.throws(() => relyingPartyOf(''), { code: 'ERR_IDENTITY_NOT_CONFIGURED' });
  for (const bad of [
    'http://backup.example.org',
    'https://backup.example.org/',
    'https://x.org/console',
    'nope',
  ])
    t.throws(() => relyingPartyOf(bad), { code: 'ERR_IDENTITY_INVALID_ARGUMENT' }, bad);
});
