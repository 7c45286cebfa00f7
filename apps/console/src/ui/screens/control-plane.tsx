/**
 * Control plane (docs/control-plane.md, docs/console.md "Control plane"): the recovery status for
 * anyone signed in; for `access.policy` holders the signed and sealed export downloads and the
 * import of another engine's export (a sealed one opened in this browser with the break-glass
 * key); and, when the engine is empty or says recovery is needed, the recovery panel that
 * restores an export with the bare admin token and applies the staged slices. The same panel is
 * at `/recover` for a browser with no session (before any owner exists nobody can sign in).
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from '../api/client.ts';
import { can, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, Loading, Page } from '../components/ui.tsx';
import { ExportPanel } from './control-plane/export.tsx';
import { ImportPanel } from './control-plane/import.tsx';
import { RecoveryPanel } from './control-plane/recovery.tsx';
import { StatusView } from './control-plane/status.tsx';
import { CONTROL_PLANE_STATUS_KEY, type ControlPlaneStatus } from './control-plane/types.ts';

export function ControlPlane() {
  const who = useSignedIn();
  const client = useQueryClient();
  const status = useQuery({
    queryKey: CONTROL_PLANE_STATUS_KEY,
    queryFn: () => api.get<ControlPlaneStatus>('/admin/control-plane/status'),
  });
  const refresh = () => void client.invalidateQueries({ queryKey: CONTROL_PLANE_STATUS_KEY });
  const policy = can(who, 'access.policy');
  const s = status.data;
  // Once shown, the recovery panel stays for this visit: after apply-staged the engine is no longer
  // empty, and the panel still shows what was applied.
  const [recovery, setRecovery] = useState(false);
  useEffect(() => {
    if (s && (s.empty || s.recoveryNeeded || s.staged)) setRecovery(true);
  }, [s]);
  return (
    <Page title="Control plane">
      <section className="panel" aria-labelledby="cp-status-title">
        <h2 id="cp-status-title">Status</h2>
        {status.isPending ? <Loading /> : null}
        <ErrorBox error={status.error} onRetry={() => void status.refetch()} />
        {s ? <StatusView status={s} /> : null}
      </section>
      {recovery ? <RecoveryPanel onChanged={refresh} /> : null}
      {policy && s ? <ExportPanel breakGlassKey={s.breakGlassKey} /> : null}
      {policy ? <ImportPanel onImported={refresh} /> : null}
      {policy ? null : (
        <p className="muted">Exports and imports are for people who hold the access.policy capability.</p>
      )}
    </Page>
  );
}
