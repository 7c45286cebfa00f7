/**
 * The recovery panel: restore an export into an EMPTY engine with the bare admin token, then
 * apply the staged slices (docs/control-plane.md "Restore into an empty engine",
 * docs/console.md "Control plane"). Reachable signed in (Control plane screen, when the status
 * says empty or recovery needed) and signed out at `/recover` (linked from the sign-in screen),
 * because before any owner exists nobody can sign in. The admin token is typed here, kept only in
 * this component's memory, sent only as `Authorization: Bearer` on the status, restore and
 * apply-staged requests, and never stored. A sealed export is opened in this browser with the
 * break-glass secret key file; the key never leaves the page.
 */
import { useState } from 'react';
import { AdminTokenField, ErrorBox, formatTime, Notice } from '../../components/ui.tsx';
import { bare } from './bare.ts';
import { BreakGlassKeyField, ExportFileField } from './file-fields.tsx';
import { readKeyText, signedFields } from './files.ts';
import { StatusView } from './status.tsx';
import type { ApplyStagedReply, ControlPlaneStatus, ExportFile, RestoreReply } from './types.ts';
import { unsealInBrowser } from './unseal.ts';
import './control-plane.css';

export function RecoveryPanel({ onChanged }: { onChanged?: () => void }) {
  const [token, setToken] = useState('');
  const [file, setFile] = useState<ExportFile | null>(null);
  const [keyFile, setKeyFile] = useState<File | null>(null);
  const [status, setStatus] = useState<ControlPlaneStatus | null>(null);
  const [restored, setRestored] = useState<RestoreReply | null>(null);
  const [applied, setApplied] = useState<ApplyStagedReply | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  const run = async (what: string, fn: () => Promise<void>) => {
    setBusy(what);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  const readStatus = () =>
    run('status', async () => {
      setStatus(await bare<ControlPlaneStatus>('GET', '/admin/control-plane/status', token.trim()));
    });
  const restore = () =>
    run('restore', async () => {
      if (!file) throw new Error('Choose the export file first.');
      let reply: RestoreReply;
      if (file.kind === 'sealed') {
        if (!keyFile) throw new Error('Choose your break-glass secret key file to open the sealed export.');
        const opened = await unsealInBrowser(file.body, await readKeyText(keyFile, 'a key file'));
        reply = await bare<RestoreReply>('POST', '/admin/control-plane/restore-sealed', token.trim(), {
          sealed: file.body,
          plaintext: opened.plaintext,
        });
      } else {
        reply = await bare<RestoreReply>(
          'POST',
          '/admin/control-plane/restore',
          token.trim(),
          signedFields(file.body),
        );
      }
      setRestored(reply);
      setStatus(await bare<ControlPlaneStatus>('GET', '/admin/control-plane/status', token.trim()));
      onChanged?.();
    });
  const applyStaged = () =>
    run('apply', async () => {
      const bearer = token.trim();
      const reply = await bare<ApplyStagedReply>('POST', '/admin/control-plane/apply-staged', bearer);
      // Done: the token leaves the form (and, after the status read below, this page's memory).
      setToken('');
      setApplied(reply);
      setStatus(
        await bare<ControlPlaneStatus>('GET', '/admin/control-plane/status', bearer).catch(() => null),
      );
      onChanged?.();
    });

  const staged = restored !== null || (status?.staged ?? null) !== null;
  return (
    <section className="panel" aria-labelledby="cp-recover-title">
      <h2 id="cp-recover-title">Restore into this empty engine</h2>
      <p>
        Restoring needs the deployment's <strong>admin token</strong> itself (a signed-in session is not
        enough): type it here. It is sent only with these requests, as <code>Authorization: Bearer</code>, and
        is not kept after this page. The export must come from this engine's signer. A sealed export is opened
        here in your browser with your break-glass secret key file, which is never sent.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void restore();
        }}
      >
        <AdminTokenField token={token} setToken={setToken} />
        <div className="row">
          <button
            type="button"
            disabled={busy !== null || token.trim() === ''}
            onClick={() => void readStatus()}
          >
            Read the status with the token
          </button>
        </div>
        <ExportFileField
          label="Export file (signed or sealed)"
          hint="The .json (or .sealed.json) the export download saved."
          file={file}
          onFile={setFile}
          onError={setError}
        />
        {file?.kind === 'sealed' ? (
          <BreakGlassKeyField label="Break-glass secret key file" onKeyFile={setKeyFile} />
        ) : null}
        <ErrorBox error={error} />
        <div className="row">
          <button
            type="submit"
            className="primary"
            disabled={busy !== null || !file || token.trim() === '' || restored !== null}
          >
            {busy === 'restore' ? 'Restoring…' : 'Restore'}
          </button>
          {staged && !applied ? (
            <button
              type="button"
              className="primary"
              disabled={busy !== null || token.trim() === ''}
              onClick={() => void applyStaged()}
            >
              {busy === 'apply' ? 'Applying…' : 'Apply the staged slices'}
            </button>
          ) : null}
        </div>
      </form>
      {status ? <StatusView status={status} /> : null}
      {restored ? <RestoredView reply={restored} /> : null}
      {applied ? (
        <Notice kind="ok">
          Applied the staged slices: run history of {applied.applied.resume.jobs} job(s) (
          {applied.applied.resume.runs} run(s) added), {applied.applied.authority.members} member(s) and{' '}
          {applied.applied.authority.customRoles} custom role(s) restored. People can sign in again with their
          passkeys.
        </Notice>
      ) : null}
    </section>
  );
}

function RestoredView({ reply }: { reply: RestoreReply }) {
  const a = reply.applied;
  return (
    <section className="cp-result" aria-label="Restore result">
      <Notice kind="ok">
        Restored the configuration of a {reply.sealed ? 'sealed' : 'signed'} export made{' '}
        {formatTime(reply.exportedAt)}.
        {reply.historyFailures > 0 ? ` ${reply.historyFailures} config-history write(s) failed.` : ''}
      </Notice>
      <h3>Applied</h3>
      <table>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Outcome</th>
            <th scope="col">Revision</th>
            <th scope="col">Enabled</th>
          </tr>
        </thead>
        <tbody>
          {a.jobs.map((j) => (
            <tr key={j.id}>
              <td>{j.id}</td>
              <td>{j.outcome}</td>
              <td>{j.configRev}</td>
              <td>{j.enabled ? 'yes' : 'no'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p>
        Channels: {a.channels.length}, rules: {a.rules.length}, policies: {a.policies.join(', ') || 'none'},
        retention pins: {a.pins}, runs: {a.runs}.
      </p>
      <h3>Staged (waiting for "Apply the staged slices")</h3>
      <p>
        Run history of {reply.staged.resume.jobs} job(s) ({reply.staged.resume.runs} run(s)); who may do what:{' '}
        {reply.staged.authority.members} member(s), {reply.staged.authority.customRoles} custom role(s). Check
        the configuration first; nobody can sign in until the staged slices are applied.
      </p>
    </section>
  );
}

/** `/recover`: the panel on its own, for a browser with no session (before any owner exists). */
export function RecoverPage() {
  return (
    <main className="center" id="main">
      <div className="card cp-recover-card">
        <h1>Control-plane recovery</h1>
        <RecoveryPanel />
        <p>
          <a href="/">Back to sign-in</a>
        </p>
      </div>
    </main>
  );
}
