/**
 * GET /admin/licence over HTTP with licences minted by the vendor's tool (scripts/sign-licence.mjs,
 * run as a process): valid (the licensed tier), lapsed, not yet valid, tampered (one field of the
 * body, one byte of the signature), signed by another key, a file that is not a licence, no file,
 * and no vendor key pinned (the built-in pin is empty): every state but `valid` leaves the free
 * tier and shows nothing unverified. The file is read at each request. With a lapsed licence a
 * backup runs and a restore dry run answers its plan: a licence never gates either.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { BUILT_IN_VENDOR_PUBLIC_KEY } from '../../src/posture/index.ts';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { postureWorld, session } from './helpers.ts';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'sign-licence.mjs');
const tool = (...args: string[]) => execFileSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });

const w = await postureWorld(t);
const dir = tempDir(t, 'coffer-licence-');
const vendor = join(dir, 'vendor');
const other = join(dir, 'other');
tool('keygen', vendor);
tool('keygen', other);
const licenceFile = join(dir, 'licence.json');
const day = 86_400_000;
const iso = (ms: number) => new Date(Date.now() + ms).toISOString();

/** Mints a licence into the engine's licence file; returns the file's parsed JSON. */
function mint(opts: { key?: string; notBefore?: number; expires?: number; tier?: string } = {}) {
  tool(
    'sign',
    '--key',
    `${opts.key ?? vendor}.key`,
    '--licensee',
    'Acme Widgets Ltd',
    '--tier',
    opts.tier ?? 'business',
    '--seats',
    '25',
    '--id',
    'lic-0001',
    '--issued',
    iso(-2 * day),
    '--not-before',
    iso(opts.notBefore ?? -day),
    '--expires',
    iso(opts.expires ?? 30 * day),
    '--out',
    licenceFile,
  );
  return JSON.parse(readFileSync(licenceFile, 'utf8'));
}

const roots = join(w.dir, 'roots');
mkdirSync(roots);
const e = await startEngine(
  t,
  {
    ENGINE_BREAK_GLASS_PUBLIC_KEY: w.breakGlassPub,
    ENGINE_LICENCE_FILE: licenceFile,
    ENGINE_LICENCE_VENDOR_PUBLIC_KEY: `${vendor}.pub`,
    ENGINE_RESTORE_ROOTS: roots,
  },
  { rateLimit: { max: 1000, windowSeconds: 60 } },
);
// biome-ignore lint/suspicious/noExplicitAny: replies are read field by field
const licence = async (headers: Record<string, string> = bearer()): Promise<any> => {
  const r = await http(`${e.url}/admin/licence`, { headers });
  t.equal(r.status, 200, r.text);
  return r.json();
};
const UNVERIFIED = {
  licensee: null,
  licensedTier: null,
  seats: null,
  licenceId: null,
  issuedAt: null,
  notBefore: null,
  expiresAt: null,
};

t.test('no vendor key is pinned in this build', async (t) => {
  t.equal(BUILT_IN_VENDOR_PUBLIC_KEY, null);
});

t.test('no licence file yet: absent, free tier', async (t) => {
  const r = await licence();
  t.match(r, { tier: 'free', status: 'absent', reason: /does not exist/, ...UNVERIFIED });
  t.match(r.vendorKey, { source: 'variable', fingerprint: /^sha384:/ });
  t.same(r.gates, { backups: false, restores: false, drills: false });
});

t.test('a valid licence: the licensed tier, for any signed-in caller', async (t) => {
  const file = mint();
  const r = await licence(await session(e, 'viewer'));
  t.match(r, {
    tier: 'business',
    status: 'valid',
    reason: null,
    licensee: 'Acme Widgets Ltd',
    licensedTier: 'business',
    seats: 25,
    licenceId: 'lic-0001',
    expiresAt: file.body.expiresAt,
    notBefore: file.body.notBefore,
  });
  t.equal(file.kind, 'coffer-licence');
  t.equal((await http(`${e.url}/admin/licence`)).status, 401, 'anonymous: 401');
  const status = (await http(`${e.url}/admin/status`, { headers: bearer() })).json();
  t.same(status.licence, { tier: 'business', status: 'valid', expiresAt: file.body.expiresAt });
});

t.test('lapsed and not yet valid: free tier, the verified dates shown', async (t) => {
  const lapsed = mint({ notBefore: -10 * day, expires: -day });
  t.match(await licence(), {
    tier: 'free',
    status: 'lapsed',
    licensee: 'Acme Widgets Ltd',
    licensedTier: 'business',
    expiresAt: lapsed.body.expiresAt,
  });
  mint({ notBefore: day, expires: 10 * day });
  t.match(await licence(), { tier: 'free', status: 'not-yet-valid', licensedTier: 'business' });
});

t.test('tampered, another signer, or not a licence: invalid, nothing unverified shown', async (t) => {
  const file = mint();
  writeFileSync(licenceFile, JSON.stringify({ ...file, body: { ...file.body, tier: 'enterprise' } }));
  t.match(await licence(), {
    tier: 'free',
    status: 'invalid',
    reason: /signature does not verify/,
    ...UNVERIFIED,
  });

  const sig = file.signature as string;
  const flipped = `${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
  writeFileSync(licenceFile, JSON.stringify({ ...file, signature: flipped }));
  t.match(await licence(), { status: 'invalid', reason: /signature does not verify/ });

  // The Ed25519 half kept, the ML-DSA half cut: both halves must verify.
  writeFileSync(licenceFile, JSON.stringify({ ...file, signature: sig.slice(0, 100) }));
  t.match(await licence(), { status: 'invalid', tier: 'free' });

  mint({ key: other });
  t.match(await licence(), {
    tier: 'free',
    status: 'invalid',
    reason: /signature does not verify/,
    ...UNVERIFIED,
  });

  writeFileSync(licenceFile, 'not json');
  t.match(await licence(), { status: 'invalid', reason: /not JSON/ });
  writeFileSync(licenceFile, JSON.stringify({ kind: 'coffer-licence', body: { v: 2 }, signature: 'x' }));
  t.match(await licence(), { status: 'invalid', reason: /version/ });
});

t.test('without the override variable, no licence is believed', async (t) => {
  mint();
  const bare = await startEngine(t, { ENGINE_LICENCE_FILE: licenceFile });
  const r = (await http(`${bare.url}/admin/licence`, { headers: bearer() })).json();
  t.match(r, { tier: 'free', status: 'invalid', reason: /no vendor key is pinned/, ...UNVERIFIED });
  t.same(r.vendorKey, { source: 'none', fingerprint: null });
  const none = await startEngine(t, {});
  t.match((await http(`${none.url}/admin/licence`, { headers: bearer() })).json(), {
    tier: 'free',
    status: 'absent',
    reason: /ENGINE_LICENCE_FILE/,
  });
  // A vendor key variable naming a missing file: every licence invalid, the engine still starts.
  const broken = await startEngine(t, {
    ENGINE_LICENCE_FILE: licenceFile,
    ENGINE_LICENCE_VENDOR_PUBLIC_KEY: join(dir, 'no-such.pub'),
  });
  t.match((await http(`${broken.url}/admin/licence`, { headers: bearer() })).json(), {
    status: 'invalid',
    reason: /not a readable signer public key/,
  });
  // A secret key given as the vendor key is not used.
  const secret = await startEngine(t, {
    ENGINE_LICENCE_FILE: licenceFile,
    ENGINE_LICENCE_VENDOR_PUBLIC_KEY: `${vendor}.key`,
  });
  const s = await http(`${secret.url}/admin/licence`, { headers: bearer() });
  t.match(s.json(), { status: 'invalid' });
  const secretBody = readFileSync(`${vendor}.key`, 'utf8')
    .split('\n')
    .find((l) => l.length > 40)!;
  t.notOk(s.text.includes(secretBody), 'the secret key is not echoed');
});

t.test('a lapsed licence gates neither a backup nor a restore', async (t) => {
  mint({ notBefore: -10 * day, expires: -day });
  t.equal((await licence()).status, 'lapsed');
  const src = join(dir, 'source');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'a.txt'), 'alpha\n');
  writeFileSync(join(src, 'b.txt'), 'bravo\n');
  const post = (path: string, body: unknown) => http(`${e.url}/admin${path}`, { headers: bearer(), body });
  t.equal(
    (await post('/jobs', { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: src } })).status,
    200,
  );
  const trig = await post('/trigger', { id: 'docs' });
  t.equal(trig.status, 200, trig.text);
  await e.app.runs.idle();
  const runId = trig.json().runId as string;
  t.equal((await e.app.state.runs.get(runId))?.status, 'ok', 'the backup ran');
  const dry = await post('/restore', { runId, target: { namespaceId: join(roots, 'docs') } });
  t.equal(dry.status, 200, dry.text);
  t.match(dry.json(), { ok: true, plannedWrites: 2, recordsVerified: 2 });
  rmSync(licenceFile);
  t.equal((await licence()).status, 'absent');
  t.equal((await post('/trigger', { id: 'docs' })).status, 200, 'and without any licence file');
  await e.app.runs.idle();
});
