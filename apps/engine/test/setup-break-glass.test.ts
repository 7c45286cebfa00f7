// The break-glass public key given from the console (POST /admin/setup/break-glass-key): refused
// without keys.ceremony, for a secret key (never echoed or logged), a key of another kind or text
// that is not a key; accepted once while the engine has none, after which runs seal to it and
// status says keysReady; never replaced (409, also when ENGINE_BREAK_GLASS_PUBLIC_KEY set one);
// kept in the state store so the next start adopts it; audited with the fingerprint.
import { encodeKeyFile, fingerprint, generateRecipient, generateSigner } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

t.test('the break-glass key from the console', async (t) => {
  const dataDir = tempDir(t, 'coffer-bg-');
  const engine = await startEngine(t, { ENGINE_DATA_DIR: dataDir, CONSOLE_ORIGIN: CONSOLE });
  const post = (body: unknown, headers: Record<string, string> = bearer()) =>
    http(`${engine.url}/admin/setup/break-glass-key`, { headers, body });
  const status = async () => (await http(`${engine.url}/admin/status`, { headers: bearer() })).json();
  t.equal((await status()).keysReady, false, 'no key yet');

  // A viewer's session cannot (keys.ceremony is the owner's).
  await engine.app.state.roles.assign({
    subject: passkeySubject('viewer@example.org'),
    email: 'viewer@example.org',
    role: 'viewer',
    grantedBy: 'test',
  });
  const viewer = await engine.app.sessions.mint({
    subject: passkeySubject('viewer@example.org'),
    email: 'viewer@example.org',
    method: 'passkey',
  });
  const pair = generateRecipient();
  const pub = encodeKeyFile('recipient-public', pair.publicKey);
  const asViewer = await post(
    { publicKey: pub },
    { cookie: `${SESSION_COOKIE}=${viewer.token}`, origin: CONSOLE },
  );
  t.equal(asViewer.status, 403);
  t.match(asViewer.json(), { error: 'forbidden', required: 'keys.ceremony', have: 'viewer' });

  // A secret key pasted by mistake: refused, not echoed, not logged.
  const secret = encodeKeyFile('recipient-secret', pair.secretKey);
  const s = await post({ publicKey: secret });
  t.equal(s.status, 400);
  t.match(s.json().error, /SECRET key/);
  const secretBody = secret.split('\n').find((l) => l.length > 40)!;
  t.notOk(s.text.includes(secretBody), 'the answer does not echo the secret');
  t.notOk(engine.logs.join('').includes(secretBody), 'the logs do not hold the secret');
  t.equal(
    (await post({ publicKey: encodeKeyFile('signer-public', generateSigner().publicKey) })).status,
    400,
  );
  const junk = await post({ publicKey: 'hello' });
  t.equal(junk.status, 400);
  t.match(junk.json().error, /not a Coffer key file/);
  t.equal((await post({})).status, 400, 'a missing field is a 400');
  t.equal((await status()).keysReady, false, 'nothing was set by the refusals');

  const ok = await post({ publicKey: pub });
  t.equal(ok.status, 200, ok.text);
  t.same(ok.json(), { ok: true, fingerprint: fingerprint(pair.publicKey), keysReady: true, missing: [] });
  t.equal((await status()).keysReady, true);
  const setup = (await http(`${engine.url}/admin/setup-state`, { headers: bearer() })).json();
  t.equal(setup.fingerprints.breakGlass, fingerprint(pair.publicKey), 'set-up state shows the fingerprint');

  // Never replaced.
  const other = encodeKeyFile('recipient-public', generateRecipient().publicKey);
  const again = await post({ publicKey: other });
  t.equal(again.status, 409);
  t.equal(again.json().fingerprint, fingerprint(pair.publicKey), 'the 409 names the key in force');

  // Audited with the fingerprint (and the refusal with its reason).
  const audit = (
    await http(`${engine.url}/admin/audit?action=break-glass-key-set`, { headers: bearer() })
  ).json();
  const rows = JSON.stringify(audit);
  t.match(rows, new RegExp(fingerprint(pair.publicKey)));
  t.match(rows, /secret-key/);
  t.notOk(rows.includes(secretBody), 'the audit rows do not hold the secret');

  // A job runs and seals now.
  await engine.app.close();
  const restarted = await startEngine(t, { ENGINE_DATA_DIR: dataDir, CONSOLE_ORIGIN: CONSOLE });
  const st = (await http(`${restarted.url}/admin/status`, { headers: bearer() })).json();
  t.equal(st.keysReady, true, 'the next start adopts the stored key');
  t.equal(restarted.app.keys.breakGlass?.fingerprint, fingerprint(pair.publicKey));
});

t.test('a key from the environment is never replaced from the console', async (t) => {
  const pair = generateRecipient();
  const engine = await startEngine(t, {
    CONSOLE_ORIGIN: CONSOLE,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: encodeKeyFile('recipient-public', pair.publicKey),
  });
  const r = await http(`${engine.url}/admin/setup/break-glass-key`, {
    headers: bearer(),
    body: { publicKey: encodeKeyFile('recipient-public', generateRecipient().publicKey) },
  });
  t.equal(r.status, 409);
  t.equal(r.json().fingerprint, fingerprint(pair.publicKey));
});
