/**
 * Import another engine's export (`access.policy`; docs/control-plane.md "Import into another
 * engine"): the export file (signed, or sealed and then opened in this browser with the
 * break-glass secret key, which is never sent) and the other engine's signer `.pub` text. Jobs
 * only; foreign jobs arrive disabled; existing ids are reported, never overwritten.
 */
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox, Field, Notice } from '../../components/ui.tsx';
import { BreakGlassKeyField, ExportFileField } from './file-fields.tsx';
import { readKeyText, signedFields } from './files.ts';
import type { ExportFile, ImportReply } from './types.ts';
import { unsealInBrowser } from './unseal.ts';

const IGNORED: Record<string, string> = {
  authority: 'who may do what (members, custom roles)',
  resume: 'run history',
  policies: 'policies',
  retention: 'retention pins',
};

export function ImportPanel({ onImported }: { onImported: () => void }) {
  const [file, setFile] = useState<ExportFile | null>(null);
  const [signerFile, setSignerFile] = useState<File | null>(null);
  const [keyFile, setKeyFile] = useState<File | null>(null);
  const [reply, setReply] = useState<ImportReply | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const submit = async () => {
    setBusy(true);
    setError(null);
    setReply(null);
    try {
      if (!file) throw new Error('Choose the export file first.');
      if (!signerFile) throw new Error("Choose the other engine's signer public key (.pub) file.");
      const signerPublicKey = await readKeyText(signerFile, 'a public key file');
      if (/SECRET KEY|PRIVATE KEY/.test(signerPublicKey))
        throw new Error("That is a secret key: choose the signer's PUBLIC key (.pub) file.");
      if (file.kind === 'sealed') {
        if (!keyFile) throw new Error('Choose your break-glass secret key file to open the sealed export.');
        const opened = await unsealInBrowser(file.body, await readKeyText(keyFile, 'a key file'));
        setReply(
          await api.post<ImportReply>('/admin/control-plane/import-sealed', {
            sealed: file.body,
            plaintext: opened.plaintext,
            signerPublicKey,
          }),
        );
      } else {
        setReply(
          await api.post<ImportReply>('/admin/control-plane/import', {
            ...signedFields(file.body),
            signerPublicKey,
          }),
        );
      }
      onImported();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="panel" aria-labelledby="cp-import-title">
      <h2 id="cp-import-title">Import from another engine</h2>
      <p>
        Brings in another engine's jobs only. Jobs signed by another engine arrive <strong>disabled</strong>:
        review their sources, schedules and destinations before enabling them. An import never grants
        authority, never changes a policy and never overwrites a job that exists here.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <ExportFileField
          label="Export file to import (signed or sealed)"
          file={file}
          onFile={setFile}
          onError={setError}
        />
        <Field
          label="Signer public key of the exporting engine (.pub)"
          hint="The export is verified against this key: get it from the other engine's operator."
        >
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              type="file"
              accept=".pub,text/plain"
              onChange={(e) => setSignerFile(e.target.files?.[0] ?? null)}
            />
          )}
        </Field>
        {file?.kind === 'sealed' ? (
          <BreakGlassKeyField
            label="Break-glass secret key file (to open the sealed export)"
            onKeyFile={setKeyFile}
          />
        ) : null}
        <ErrorBox error={error} />
        <button type="submit" className="primary" disabled={busy || !file || !signerFile}>
          {busy ? 'Importing…' : 'Import'}
        </button>
      </form>
      {reply ? <ImportResult reply={reply} /> : null}
    </section>
  );
}

function ImportResult({ reply }: { reply: ImportReply }) {
  const imported = reply.items.filter((i) => i.outcome === 'imported');
  const disabled = imported.filter((i) => !i.enabled).length;
  return (
    <section className="cp-result" aria-label="Import result">
      <Notice kind="ok">
        Imported {imported.length} job(s) from a {reply.sealed ? 'sealed' : 'signed'} export of{' '}
        {reply.sameSigner ? 'this engine' : 'another engine'}
        {disabled > 0 ? `; ${disabled} arrived disabled for review` : ''}.
      </Notice>
      <table>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Outcome</th>
            <th scope="col">Revision</th>
          </tr>
        </thead>
        <tbody>
          {reply.items.map((j) => (
            <tr key={j.id}>
              <td>{j.id}</td>
              <td>
                {j.outcome === 'exists'
                  ? 'exists here (left untouched)'
                  : j.enabled
                    ? 'imported, enabled'
                    : 'imported disabled'}
              </td>
              <td>{j.configRev}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p>
        Notification channels: {reply.channels.applied.length} imported, {reply.channels.skipped.length}{' '}
        skipped; rules: {reply.rules.applied.length} imported, {reply.rules.skipped.length} skipped
        {reply.sameSigner ? '' : ' (channels and rules come only from this engine’s own exports)'}.
      </p>
      <p>Ignored (an import never brings these): {reply.ignored.map((k) => IGNORED[k] ?? k).join(', ')}.</p>
      {reply.heldByApproval ? (
        <Notice kind="info">
          Configuration dual control is on: every imported job arrived disabled, and enabling one is a job
          change a second person approves.
        </Notice>
      ) : null}
      {reply.historyFailures > 0 ? (
        <Notice kind="warn">{reply.historyFailures} config-history write(s) failed.</Notice>
      ) : null}
    </section>
  );
}
