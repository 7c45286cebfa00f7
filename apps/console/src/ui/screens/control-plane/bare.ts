/**
 * Requests made with the bare admin token (docs/control-plane.md: restore, restore-sealed and
 * apply-staged accept `Authorization: Bearer <ADMIN_TOKEN>` itself, never a session, not even a
 * token session made from it). The token is sent only in that header, through the console's
 * proxy, and lives only in the recovery panel's memory. Cookies are omitted: a session cookie
 * would take precedence over the bearer at the engine, and the restore routes refuse sessions.
 */
import { errorFromResponse } from '../../api/errors.ts';

export async function bare<T>(
  method: 'GET' | 'POST',
  path: string,
  token: string,
  body?: unknown,
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${token}` };
  const payload = method === 'POST' ? JSON.stringify(body ?? {}) : undefined;
  if (payload !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'omit',
    ...(payload !== undefined ? { body: payload } : {}),
  });
  if (!res.ok) throw await errorFromResponse(res);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}
