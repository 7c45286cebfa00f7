/**
 * Sending a lifecycle step (`POST /admin/update/apply`, `ramp`, `settle`, `ramp/settle`,
 * `rollback`) and reading its reply whatever the status: a refusal (409, or 400 for a malformed
 * request) is a reply to show with its code and step, not an error; 202 is `queued` for a second
 * owner; a 403 naming the deploy token becomes a message that says what to do. A live step carries
 * the deploy token in `x-engine-deploy-token`; step-up is asked for in place by the API client
 * (before the engine takes the token), and the retried request carries the token again.
 */
import { api, isQueued } from '../../api/client.ts';
import { StepUpCancelled } from '../../auth/step-up.tsx';
import { DEPLOY_TOKEN_HEADER, isDeployTokenRefusal, type LifecycleReply, replyOf } from './types.ts';

export class DeployTokenRefused extends Error {
  constructor() {
    super(
      'The engine refused the live step: the deploy token is missing, wrong, already used or expired. Get a new deploy token and try again.',
    );
    this.name = 'DeployTokenRefused';
  }
}

export async function sendStep(
  path: string,
  body: Record<string, unknown>,
  deployToken?: string,
): Promise<LifecycleReply> {
  try {
    const r = await api.post<LifecycleReply | { ownerActionQueued: true; id: string; status: 'pending' }>(
      path,
      body,
      deployToken ? { headers: { [DEPLOY_TOKEN_HEADER]: deployToken } } : undefined,
    );
    // The generic owner-action shape (`{ ownerActionQueued, id }`) carries no outcome of its own.
    if (isQueued(r) && typeof (r as { outcome?: unknown }).outcome !== 'string')
      return {
        outcome: 'queued',
        step: null,
        code: null,
        passed: [],
        record: null,
        id: r.id,
        ownerActionQueued: true,
      };
    const reply = r as LifecycleReply;
    return {
      ...reply,
      passed: Array.isArray(reply.passed) ? reply.passed : [],
      record: reply.record ?? null,
      ...(reply.id === undefined && reply.approval?.id !== undefined ? { id: reply.approval.id } : {}),
    };
  } catch (err) {
    const reply = replyOf(err);
    if (reply) return reply;
    if (isDeployTokenRefusal(err)) throw new DeployTokenRefused();
    throw err;
  }
}

/**
 * After `restarting`: polls `GET /admin/update/status` until the engine answers again, that is
 * answers after having stopped answering, answers running `expect`, or answers 15 s on. Resolves with the running
 * engine version, or null when it did not come back within `timeoutMs`.
 */
export async function waitForEngine(
  signal: AbortSignal,
  expect: string | undefined,
  timeoutMs = 180_000,
): Promise<string | null> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  let wentAway = false;
  while (Date.now() < deadline && !signal.aborted) {
    await new Promise((r) => setTimeout(r, 1000));
    try {
      // Each poll gives up after 5 s: a connection to the engine that went away may never answer.
      const r = await fetch('/admin/update/status', {
        credentials: 'same-origin',
        signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]),
      });
      if (r.ok) {
        const running = ((await r.json()) as { running?: { engine?: string } }).running?.engine ?? null;
        // A restart quicker than a poll is never seen going away: after 15 s an answer is enough.
        if (wentAway || (expect !== undefined && running === expect) || Date.now() - started > 15_000)
          return running;
      } else if (r.status >= 500) wentAway = true;
    } catch {
      // the engine (or the console's proxy to it) is not answering yet
      wentAway = true;
    }
  }
  return null;
}

/**
 * Sends a lifecycle step from a panel holding the deploy token: a live step that reached the
 * engine used the token up, whatever the engine answered, so the panel's copy is cleared (a
 * cancelled step-up never reached it and keeps it).
 */
export async function sendWithToken(
  path: string,
  body: Record<string, unknown>,
  live: boolean,
  token: string,
  clearToken: () => void,
): Promise<LifecycleReply> {
  let r: LifecycleReply;
  try {
    r = await sendStep(path, body, live ? token.trim() : undefined);
  } catch (err) {
    if (live && !(err instanceof StepUpCancelled)) clearToken();
    throw err;
  }
  if (live) clearToken();
  return r;
}
