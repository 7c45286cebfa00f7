/** Recovery codes shown once after a registration or a regeneration, then confirmed. */
import { useState } from 'react';
import { api, saveBlob } from '../api/client.ts';
import { CopyButton, ErrorBox } from '../components/ui.tsx';

export function RecoveryCodesShown({ codes, onConfirmed }: { codes: string[]; onConfirmed: () => void }) {
  const [kept, setKept] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const text = `${codes.join('\n')}\n`;
  return (
    <div>
      <p>
        These recovery codes are shown <strong>once</strong>. Each signs you in one time if you lose your
        passkey. Keep them somewhere safe, away from this device.
      </p>
      <ol className="codes" aria-label="Recovery codes">
        {codes.map((c) => (
          <li key={c}>
            <code>{c}</code>
          </li>
        ))}
      </ol>
      <div className="row">
        <CopyButton text={text} label="Copy codes" />
        <button
          type="button"
          onClick={() => saveBlob(new Blob([text], { type: 'text/plain' }), 'coffer-recovery-codes.txt')}
        >
          Download codes
        </button>
      </div>
      <label className="check">
        <input type="checkbox" checked={kept} onChange={(e) => setKept(e.target.checked)} /> I have kept these
        codes
      </label>
      <ErrorBox error={error} />
      <button
        type="button"
        className="primary"
        disabled={!kept}
        onClick={() => {
          api.post('/admin/auth/recovery-codes/confirm', {}).then(onConfirmed, setError);
        }}
      >
        Confirm and continue
      </button>
    </div>
  );
}
