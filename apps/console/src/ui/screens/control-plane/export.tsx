/** Export downloads (`access.policy`): the signed export, and the sealed one when a break-glass key is set. */
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox } from '../../components/ui.tsx';

export function ExportPanel({ breakGlassKey }: { breakGlassKey: boolean }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const download = async (sealed: boolean) => {
    setBusy(sealed ? 'sealed' : 'signed');
    setError(null);
    try {
      await api.download(
        `/admin/control-plane/export-download${sealed ? '?sealed=1' : ''}`,
        sealed ? 'coffer-control-plane.sealed.json' : 'coffer-control-plane.json',
      );
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  return (
    <section className="panel" aria-labelledby="cp-export-title">
      <h2 id="cp-export-title">Export</h2>
      <p>
        An export carries what this engine runs (jobs, notification channels and rules, policies, retention
        pins), where each job's history stands, and who may do what. It is signed by this engine and carries
        no plaintext secret, but it names sources, schedules and people: keep it confidential. The sealed
        export opens only with the break-glass secret key; prefer it for storage.
      </p>
      <div className="row">
        <button type="button" disabled={busy !== null} onClick={() => void download(false)}>
          {busy === 'signed' ? 'Preparing…' : 'Download signed export'}
        </button>
        {breakGlassKey ? (
          <button type="button" disabled={busy !== null} onClick={() => void download(true)}>
            {busy === 'sealed' ? 'Preparing…' : 'Download sealed export'}
          </button>
        ) : null}
      </div>
      {breakGlassKey ? null : (
        <p className="muted">
          No sealed export: this engine has no break-glass key to seal it to. Set one on the Set-up screen (or
          with <code>ENGINE_BREAK_GLASS_PUBLIC_KEY</code>).
        </p>
      )}
      <ErrorBox error={error} />
    </section>
  );
}
