// Passkey ceremonies against a software authenticator (real ES256 signatures, real WebAuthn byte
// layouts): register and sign in, then every edge the issue names: a replayed or foreign challenge,
// the wrong origin, the wrong RP id, a counter that goes back, no user verification, a credential
// the engine does not know, a bad signature.
import { SoftAuthenticator } from '@coffer/testkit';
import t from 'tap';
import {
  authenticationOptions,
  isIdentityError,
  registrationOptions,
  relyingPartyOf,
  type StoredPasskey,
  verifyAuthentication,
  verifyRegistration,
} from '../src/index.ts';

const rp = relyingPartyOf('https://backup.example.org');

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    if (!isIdentityError(e, 'ERR_IDENTITY_PASSKEY_REFUSED')) throw e;
    return e.refusal ?? 'no refusal';
  }
}

async function registered(): Promise<{ auth: SoftAuthenticator; stored: StoredPasskey }> {
  const auth = new SoftAuthenticator(rp.origin, rp.id);
  const { challenge } = await registrationOptions(rp, { email: 'ada@example.org' });
  const stored = await verifyRegistration(rp, auth.register(challenge), challenge);
  return { auth, stored };
}

t.test('options are bound to the relying party and require user verification', async (t) => {
  const { options, challenge } = await registrationOptions(rp, { email: 'ada@example.org' }, [
    { id: 'AAAA', publicKey: 'AA', counter: 0, transports: ['usb'] },
  ]);
  t.equal(options.rp.id, 'backup.example.org');
  t.equal(options.user.name, 'ada@example.org');
  t.not(Buffer.from(options.user.id, 'base64url').toString(), 'ada@example.org', 'the user handle is random');
  t.equal(options.authenticatorSelection?.userVerification, 'required');
  t.equal(options.attestation, 'none');
  t.same(
    options.excludeCredentials?.map((c) => c.id),
    ['AAAA'],
    'existing passkeys excluded',
  );
  t.equal(options.challenge, challenge);
  const again = await registrationOptions(rp, { email: 'ada@example.org' });
  t.not(again.challenge, challenge, 'a fresh challenge per ceremony');
  const login = await authenticationOptions(rp);
  t.equal(login.options.rpId, 'backup.example.org');
  t.equal(login.options.userVerification, 'required');
});

t.test('register, then sign in twice; the counter moves on', async (t) => {
  const { auth, stored } = await registered();
  t.equal(stored.id, auth.id);
  t.equal(stored.counter, 0);
  t.same(stored.transports, ['internal']);
  const first = await authenticationOptions(rp, [stored]);
  const r1 = await verifyAuthentication(rp, auth.authenticate(first.challenge), first.challenge, [stored]);
  t.same(r1, { credentialId: auth.id, newCounter: 1 });
  const second = await authenticationOptions(rp, [stored]);
  const after = { ...stored, counter: r1.newCounter };
  const r2 = await verifyAuthentication(rp, auth.authenticate(second.challenge), second.challenge, [after]);
  t.equal(r2.newCounter, 2);
});

t.test('registration refusals: challenge, origin, RP id, ceremony type, user verification', async (t) => {
  const auth = new SoftAuthenticator(rp.origin, rp.id);
  const { challenge } = await registrationOptions(rp, { email: 'ada@example.org' });
  const other = (await registrationOptions(rp, { email: 'ada@example.org' })).challenge;
  t.equal(
    await refusal(verifyRegistration(rp, auth.register(other), challenge)),
    'challenge',
    'another ceremony',
  );
  t.equal(
    await refusal(
      verifyRegistration(rp, auth.register(challenge, { origin: 'https://evil.example' }), challenge),
    ),
    'origin',
  );
  t.equal(
    await refusal(verifyRegistration(rp, auth.register(challenge, { rpId: 'evil.example' }), challenge)),
    'rp-id',
  );
  t.equal(
    await refusal(verifyRegistration(rp, auth.register(challenge, { type: 'webauthn.get' }), challenge)),
    'malformed',
    'a sign-in answer is not a registration',
  );
  t.equal(
    await refusal(verifyRegistration(rp, auth.register(challenge, { uv: false }), challenge)),
    'user-verification',
  );
  t.equal(await refusal(verifyRegistration(rp, null, challenge)), 'malformed');
  t.equal(await refusal(verifyRegistration(rp, { id: 'x' }, challenge)), 'malformed');
  // The same relying party from another console origin is not this one.
  const elsewhere = relyingPartyOf('https://other.example.org');
  t.equal(await refusal(verifyRegistration(elsewhere, auth.register(challenge), challenge)), 'origin');
});

t.test(
  'sign-in refusals: replay, origin, RP id, counter regression, UV, unknown credential, signature',
  async (t) => {
    const { auth, stored } = await registered();
    const { challenge } = await authenticationOptions(rp, [stored]);
    const answer = auth.authenticate(challenge);
    const ok = await verifyAuthentication(rp, answer, challenge, [stored]);
    const now = { ...stored, counter: ok.newCounter };
    // The engine deletes a challenge when it is used; a replayed answer then meets a new challenge.
    const next = (await authenticationOptions(rp, [now])).challenge;
    t.equal(await refusal(verifyAuthentication(rp, answer, next, [now])), 'challenge', 'replayed answer');
    t.equal(
      await refusal(
        verifyAuthentication(rp, auth.authenticate(next, { origin: 'https://evil.example' }), next, [now]),
      ),
      'origin',
    );
    t.equal(
      await refusal(verifyAuthentication(rp, auth.authenticate(next, { rpId: 'evil.example' }), next, [now])),
      'rp-id',
    );
    t.equal(
      await refusal(
        verifyAuthentication(rp, auth.authenticate(next, { counter: ok.newCounter }), next, [now]),
      ),
      'counter',
      'a counter that did not increase: a possible clone',
    );
    t.equal(
      await refusal(verifyAuthentication(rp, auth.authenticate(next, { uv: false }), next, [now])),
      'user-verification',
    );
    t.equal(
      await refusal(verifyAuthentication(rp, auth.authenticate(next, { badSignature: true }), next, [now])),
      'signature',
    );
    const stranger = new SoftAuthenticator(rp.origin, rp.id);
    t.equal(
      await refusal(verifyAuthentication(rp, stranger.authenticate(next), next, [now])),
      'unknown-credential',
    );
    // Another person's key under this credential id: the signature does not verify.
    const impostor = { ...now, publicKey: (await registered()).stored.publicKey };
    t.equal(await refusal(verifyAuthentication(rp, auth.authenticate(next), next, [impostor])), 'signature');
    t.equal(await refusal(verifyAuthentication(rp, 'junk', next, [now])), 'malformed');
    const good = await verifyAuthentication(rp, auth.authenticate(next), next, [now]);
    t.ok(good.newCounter > ok.newCounter, 'the genuine answer still works');
  },
);
