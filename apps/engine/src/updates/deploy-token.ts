/**
 * The one-shot deploy token (docs/updates.md "Deploy token"): a live apply, a live ramp and
 * `ramp/settle` need it in the `x-engine-deploy-token` header. An owner mints it with
 * `POST /admin/update/deploy-token` (keys.ceremony, step-up); it is shown once. The engine keeps
 * only its verifier in the single-use token store (`state.identity`, purpose `update-deploy`,
 * bound to `engine`): SHA-256 of its 256-bit secret. Minting a new one replaces the previous one;
 * presenting it uses it up in the same write (whether the update then passes or not), so it
 * authorises one live update step once, within its lifetime (15 minutes by default).
 *
 * Token form: `cfu_<id>.<secret>` (id 96 bits, secret 256 bits, base64url). Checks compare in
 * constant time and every refusal is the same answer.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { State } from '../state/index.ts';

export const DEPLOY_TOKEN_HEADER = 'x-engine-deploy-token';
export const DEPLOY_TOKEN_PURPOSE = 'update-deploy';
export const DEPLOY_TOKEN_TTL_MS = 15 * 60 * 1000;
const BOUND_TO = 'engine';
const FORM = /^cfu_([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/;

const digest = (secret: string) => createHash('sha256').update(secret).digest('base64url');

/** Mints a token and stores its verifier (replacing any earlier one); returns the token, shown once. */
export async function mintDeployToken(
  state: State,
  now: number,
  ttlMs = DEPLOY_TOKEN_TTL_MS,
): Promise<{ token: string; expiresAt: number }> {
  const id = randomBytes(12).toString('base64url');
  const secret = randomBytes(32).toString('base64url');
  const expiresAt = now + ttlMs;
  await state.identity.putToken(
    { id, purpose: DEPLOY_TOKEN_PURPOSE, boundTo: BOUND_TO, verifier: digest(secret), expiresAt },
    { replace: true },
  );
  return { token: `cfu_${id}.${secret}`, expiresAt };
}

/**
 * Uses up the presented token: true only when it is well formed, stored, unexpired and its secret
 * matches. A well-formed token with the right id is taken out of the store even when its secret is
 * wrong (a guess burns the live token, so the owner mints another; nothing is learnt).
 */
export async function takeDeployToken(state: State, presented: unknown, now: number): Promise<boolean> {
  if (typeof presented !== 'string' || presented.length > 100) return false;
  const m = FORM.exec(presented);
  if (!m) return false;
  const record = await state.identity.takeToken(m[1]!, { purpose: DEPLOY_TOKEN_PURPOSE, boundTo: BOUND_TO });
  if (record === null) return false;
  const want = Buffer.from(record.verifier);
  const got = Buffer.from(digest(m[2]!));
  return want.length === got.length && timingSafeEqual(want, got) && now < record.expiresAt;
}
