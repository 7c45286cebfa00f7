/**
 * Passkey ceremonies in the browser, over the engine's JSON options (docs/identity.md "Passkey
 * routes"). The browser's own JSON parsers (`parseCreationOptionsFromJSON`, `toJSON`) do the
 * base64url work; every supported Chromium, Firefox and Safari has them.
 */
import { api, type RequestOptions } from '../api/client.ts';

type CreationJSON = Parameters<typeof PublicKeyCredential.parseCreationOptionsFromJSON>[0];
type RequestJSON = Parameters<typeof PublicKeyCredential.parseRequestOptionsFromJSON>[0];

export function passkeysSupported(): boolean {
  return typeof PublicKeyCredential !== 'undefined' && 'parseCreationOptionsFromJSON' in PublicKeyCredential;
}

async function create(options: CreationJSON): Promise<unknown> {
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
  const credential = (await navigator.credentials.create({ publicKey })) as PublicKeyCredential | null;
  if (!credential) throw new Error('No passkey was created.');
  return credential.toJSON();
}

async function get(options: RequestJSON): Promise<unknown> {
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const credential = (await navigator.credentials.get({ publicKey })) as PublicKeyCredential | null;
  if (!credential) throw new Error('No passkey was chosen.');
  return credential.toJSON();
}

export interface Registered {
  ok: true;
  email: string;
  role?: string;
  recoveryCodes: string[];
  recoveryCodesPending: boolean;
  sessionExpiresAt: string;
}

/** Registers a passkey for `email` along one of the proven paths (bootstrap, invite, link, self-add). */
export async function registerPasskey(
  email: string,
  proof: { inviteToken?: string; setupToken?: string; adminToken?: string } = {},
): Promise<Registered> {
  const options: RequestOptions = proof.adminToken
    ? { headers: { authorization: `Bearer ${proof.adminToken}` }, quiet401: true }
    : { quiet401: true };
  const body: Record<string, string> = { email };
  if (proof.inviteToken) body.inviteToken = proof.inviteToken;
  if (proof.setupToken) body.setupToken = proof.setupToken;
  const creation = await api.post<CreationJSON>('/admin/auth/register/begin', body, options);
  const credential = await create(creation);
  return api.post<Registered>('/admin/auth/register/finish', { credential }, { quiet401: true });
}

export async function signInWithPasskey(
  email: string,
): Promise<{ ok: true; email: string; sessionExpiresAt: string }> {
  const request = await api.post<RequestJSON>('/admin/auth/login/begin', { email }, { quiet401: true });
  const credential = await get(request);
  return api.post('/admin/auth/login/finish', { credential }, { quiet401: true });
}

/** Step-up: fresh proof with one's passkey; returns the single-use `x-engine-stepup` header. */
export async function stepUpWithPasskey(): Promise<Record<string, string>> {
  const request = await api.post<RequestJSON>('/admin/stepup/begin', {}, { quiet401: true });
  const credential = await get(request);
  const done = await api.post<{ stepUpToken: string }>(
    '/admin/stepup/finish',
    { credential },
    { quiet401: true },
  );
  return { 'x-engine-stepup': done.stepUpToken };
}
