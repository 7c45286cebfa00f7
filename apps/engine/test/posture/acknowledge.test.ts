/**
 * POST /admin/setup/acknowledge over HTTP with signed-in people: refused for a role without
 * keys.ceremony (403); refused while the break-glass key is missing (409 naming the variable,
 * audited as a refused `setup-acknowledge` with keysReady false); accepted by an owner once the key
 * is given from the console (audited with keysReady true, shown in GET /admin/setup-state and
 * GET /admin/status); a repeat keeps the first record. A break-glass key another replica stored is
 * observed (adopted) before deciding.
 */
import { readFileSync } from 'node:fs';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { BREAK_GLASS_SETTING } from '../../src/keys.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { CONSOLE, postureWorld, session } from './helpers.ts';

const w = await postureWorld(t);
const pub = readFileSync(w.breakGlassPub, 'utf8');

t.test('refused without the break-glass key, accepted with it', async (t) => {
  const e = await startEngine(
    t,
    { CONSOLE_ORIGIN: CONSOLE },
    { rateLimit: { max: 1000, windowSeconds: 60 } },
  );
  const owner = await session(e, 'owner');
  const viewer = await session(e, 'viewer');
  const ack = (headers: Record<string, string>) =>
    http(`${e.url}/admin/setup/acknowledge`, { method: 'POST', headers });
  const setup = async () => (await http(`${e.url}/admin/setup-state`, { headers: bearer() })).json();

  const denied = await ack(viewer);
  t.equal(denied.status, 403);
  t.match(denied.json(), { error: 'forbidden', required: 'keys.ceremony', have: 'viewer' });

  const early = await ack(owner);
  t.equal(early.status, 409, early.text);
  t.same(early.json().missing, ['ENGINE_BREAK_GLASS_PUBLIC_KEY'], 'names what is missing');
  t.match(await setup(), { keysReady: false, acknowledged: false, acknowledgement: null });

  // The key is given from the console (the bare token is exempt from step-up).
  const set = await http(`${e.url}/admin/setup/break-glass-key`, {
    headers: bearer(),
    body: { publicKey: pub },
  });
  t.equal(set.status, 200, set.text);

  const ok = await ack(owner);
  t.equal(ok.status, 200, ok.text);
  t.match(ok.json(), {
    ok: true,
    alreadyAcknowledged: false,
    keysReady: true,
    acknowledgement: {
      at: /^\d{4}-/,
      current: true,
      fingerprints: {
        signer: e.app.keys.signer.fingerprint,
        operational: e.app.keys.operational.fingerprint,
        breakGlass: e.app.keys.breakGlass!.fingerprint,
      },
    },
  });
  const first = ok.json().acknowledgement.at;
  const state = await setup();
  t.match(state, { keysReady: true, acknowledged: true, acknowledgement: { at: first, current: true } });
  const status = (await http(`${e.url}/admin/status`, { headers: bearer() })).json();
  t.match(status, { setupAcknowledged: true, setupAcknowledgementCurrent: true, breakGlassKeySet: true });

  const again = await ack(bearer());
  t.equal(again.status, 200);
  t.match(again.json(), { alreadyAcknowledged: true, acknowledgement: { at: first } });

  const rows = (await http(`${e.url}/admin/audit?action=setup-acknowledge`, { headers: bearer() })).json();
  const events = rows.events as Array<{ outcome: string; detail: { keysReady: boolean } }>;
  t.same(
    events.map((r) => [r.outcome, r.detail.keysReady]).sort(),
    [
      ['applied', true],
      ['refused', false],
    ],
    'one refusal and one acknowledgement audited; the repeat wrote nothing',
  );
});

t.test('a break-glass key stored by another replica is observed before deciding', async (t) => {
  const dataDir = tempDir(t, 'coffer-ack-');
  const e = await startEngine(t, { ENGINE_DATA_DIR: dataDir });
  t.equal(e.app.keys.breakGlass, null);
  // Another replica sharing the state store set it after this one started.
  await e.app.state.settings.set(BREAK_GLASS_SETTING, pub.trim());
  const ok = await http(`${e.url}/admin/setup/acknowledge`, { method: 'POST', headers: bearer() });
  t.equal(ok.status, 200, ok.text);
  t.not(e.app.keys.breakGlass, null, 'adopted');
  t.equal((await http(`${e.url}/admin/setup-state`, { headers: bearer() })).json().acknowledged, true);
});
