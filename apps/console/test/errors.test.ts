// Every error body of the specification's Errors table becomes a message a person can act on
// (apps/console/src/ui/api/errors.ts), from real Response objects as fetch gives them.
import t from 'tap';
import { ApiError, errorFromResponse, isStepUp, messageOf } from '../src/ui/api/errors.ts';

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  errorFromResponse(
    new Response(JSON.stringify(body), {
      status,
      headers: { 'content-type': 'application/json', ...headers },
    }),
  );
const text = (status: number, body: string) =>
  errorFromResponse(new Response(body, { status, headers: { 'content-type': 'text/plain' } }));

t.test('the Errors table, row by row', async (t) => {
  t.match(
    (await json(400, { error: 'body/cadenceSeconds must be >= 60' })).message,
    /^CadenceSeconds must be >= 60\.$/,
  );
  t.match(
    (await json(400, { error: 'plan too old: run the dry run again' })).message,
    /Plan too old: run the dry run again\./,
  );
  const signedOut = await text(401, 'unauthorised');
  t.match(signedOut.message, /signed out/);
  t.equal(signedOut.signedOut, true);
  const stepUp = await json(401, { error: 'step-up required', stepUpRequired: true });
  t.equal(stepUp.signedOut, false, 'a step-up is never "signed out"');
  t.ok(isStepUp(stepUp.body));
  t.match(stepUp.message, /confirm it is you/);
  t.match(
    (await json(401, { error: 'step-up required', stepUpRequired: true, reauth: 'access' })).message,
    /access provider/,
  );
  const forbidden = await json(403, { error: 'forbidden', required: 'restore.approve', have: 'operator' });
  t.match(
    forbidden.message,
    /Your role \(operator\) cannot do this: it needs the restore\.approve capability/,
  );
  t.equal(forbidden.required, 'restore.approve');
  t.match(
    (await json(403, { error: 'forbidden', required: 'owner', have: 'approver' })).message,
    /needs the owner role/,
  );
  t.match((await json(403, { error: 'csrf origin check failed' })).message, /origin check/);
  t.match((await json(403, { error: 'csrf token check failed' })).message, /Reload the page/);
  t.match(
    (await json(403, { error: 'restore not approved', planHash: 'sha384:x' })).message,
    /not approved yet/,
  );
  t.match((await text(404, 'not found')).message, /Not found/);
  t.match((await json(409, { error: 'job changed' })).message, /Conflict: job changed/);
  const limited = await errorFromResponse(
    new Response(
      JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status: 429, error: 'rate limited' }),
      {
        status: 429,
        headers: { 'content-type': 'application/problem+json', 'retry-after': '7' },
      },
    ),
  );
  t.equal(limited.retryAfter, 7);
  t.match(limited.message, /Try again in 7 seconds/);
  const internal = await errorFromResponse(
    new Response(
      JSON.stringify({
        type: 'urn:engine:error:internal-error',
        title: 'Internal',
        status: 500,
        error: 'internal error',
        requestId: 'req-42',
      }),
      { status: 500, headers: { 'content-type': 'application/problem+json' } },
    ),
  );
  t.equal(internal.requestId, 'req-42');
  t.match(internal.message, /request id req-42/);
  t.match(
    (await json(501, { ok: false, reason: 'passkey_not_configured' })).message,
    /CONSOLE_ORIGIN is unset/,
  );
  t.match((await json(502, { error: 'state unavailable' })).message, /scheduler state/);
  t.match((await text(503, 'metadata unavailable')).message, /Unavailable: metadata unavailable/);
});

t.test('anything else a screen catches', async (t) => {
  t.match(messageOf(new TypeError('Failed to fetch')), /cannot reach the engine/);
  t.match(messageOf(new DOMException('x', 'NotAllowedError')), /passkey prompt was cancelled/);
  t.equal(messageOf(new Error('plain')), 'plain');
  t.ok(new ApiError({ status: 418 }).message.includes('418'));
});
