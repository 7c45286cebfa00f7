/**
 * The two file pickers the import and recovery panels share: the export file (signed or sealed,
 * parsed at once so a wrong file is named before anything is sent) and, for a sealed export, the
 * break-glass secret key file, which is only read in this browser and never uploaded.
 */
import { Field } from '../../components/ui.tsx';
import { readExportFile } from './files.ts';
import type { ExportFile } from './types.ts';

export function ExportFileField({
  label,
  hint,
  file,
  onFile,
  onError,
}: {
  label: string;
  hint?: string;
  file: ExportFile | null;
  onFile: (file: ExportFile | null) => void;
  onError: (error: unknown) => void;
}) {
  return (
    <>
      <Field label={label} {...(hint === undefined ? {} : { hint })}>
        {(id, hintId) => (
          <input
            id={id}
            aria-describedby={hintId}
            type="file"
            accept=".json,application/json"
            onChange={(e) => {
              const f = e.target.files?.[0];
              onFile(null);
              onError(null);
              if (f) void readExportFile(f).then(onFile, onError);
            }}
          />
        )}
      </Field>
      {file ? (
        <p className="muted">
          {file.name}: a {file.kind === 'sealed' ? 'sealed' : 'signed'} export.
        </p>
      ) : null}
    </>
  );
}

export function BreakGlassKeyField({
  label,
  onKeyFile,
}: {
  label: string;
  onKeyFile: (f: File | null) => void;
}) {
  return (
    <Field label={label} hint="Read here to open the export in this browser; never uploaded.">
      {(id, hint) => (
        <input
          id={id}
          aria-describedby={hint}
          type="file"
          onChange={(e) => onKeyFile(e.target.files?.[0] ?? null)}
        />
      )}
    </Field>
  );
}
