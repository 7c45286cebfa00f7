/**
 * Shared set-up of the configuration dual-control tests: an engine on loopback (restore roots and a
 * break-glass key, so runs seal) that trusts a perimeter key set, and distinct signed-in people
 * (perimeter subjects `ISSUER#<name>`) with their roles.
 */
import { postgresUrl, tempDir } from '@coffer/testkit';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { type RestoreWorld, restoreWorld } from '../restore/helpers.ts';

type T = Parameters<typeof restoreWorld>[0];

export interface People {
  w: RestoreWorld;
  /** Headers of a fresh perimeter assertion for `name` (step-up passes: the sign-in is now). */
  as(name: string): Promise<Record<string, string>>;
  grant(grants: ReadonlyArray<readonly [string, string]>): Promise<void>;
  /** The audit rows of `action`, newest first (read with the admin token). */
  // biome-ignore lint/suspicious/noExplicitAny: audit rows are read field by field
  audit(action: string): Promise<any[]>;
}

export async function peopleWorld(t: T, backend: 'sqlite' | 'postgres' = 'sqlite'): Promise<People> {
  const pki = makePki(tempDir(t, 'coffer-cc-pki-'));
  const keySet = await startKeySet(pki);
  t.teardown(() => keySet.close());
  const w = await restoreWorld(
    t,
    {
      PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
      PERIMETER_ACCESS_AUD: AUDIENCE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    },
    { testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  return {
    w,
    as: callerHeaders(keySet),
    grant: (grants) => grantRoles(w.e.app.state, grants),
    async audit(action) {
      const r = await w.get(`/audit?action=${action}&limit=500`);
      if (r.status !== 200) throw new Error(`audit: ${r.status} ${r.text}`);
      return r.json().events;
    },
  };
}

export const job = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  cadenceSeconds: 3600,
  source: { type: 'files', path: '/srv/data' },
  ...extra,
});
