/**
 * `reports.read` is held by all six built-in roles (specification "Roles and capabilities"): a
 * signed-in person of each role, and an unmatched caller (resolved to viewer), gets a signed
 * report; no credential is 401. Distinct perimeter identities over real HTTP.
 */
import { ROLES } from '@coffer/authz';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

t.test('every built-in role reads reports; anonymous is 401', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const e = await startEngine(
    t,
    { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
    { testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  await grantRoles(
    e.app.state,
    ROLES.map((role) => [`person-${role}`, role] as const),
  );
  const as = callerHeaders(keys);
  for (const who of [...ROLES.map((r) => `person-${r}`), 'nobody-in-particular']) {
    const r = await http(`${e.url}/admin/reports/audit-attestation`, { headers: await as(who) });
    t.equal(r.status, 200, `${who}: ${r.text.slice(0, 200)}`);
    t.equal(JSON.parse(r.json().report).kind, 'audit-attestation', who);
  }
  for (const kind of ['backup-coverage', 'restore-drills', 'audit-attestation', 'nope']) {
    const r = await http(`${e.url}/admin/reports/${kind}?format=pdf`);
    t.equal(r.status, 401, `${kind}: no credential`);
  }
});
