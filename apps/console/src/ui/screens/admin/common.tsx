/** Pieces the admin screens share: a confirmed action button, a secret shown once, a status tag. */
import { type ReactNode, useState } from 'react';
import { CopyButton, ErrorBox, Modal } from '../../components/ui.tsx';
import './admin.css';

/**
 * A button that asks first (a native modal dialog), then runs `action`. Errors show inside the
 * dialog so the person sees them where they acted.
 */
export function ConfirmButton({
  label,
  accessibleLabel,
  title,
  children,
  confirmLabel,
  action,
  danger = false,
}: {
  label: string;
  /** A fuller name for assistive technology when `label` is repeated on the page (per row). */
  accessibleLabel?: string;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  action: () => Promise<unknown>;
  danger?: boolean;
}) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return (
    <>
      <button
        type="button"
        className={danger ? 'danger' : undefined}
        aria-label={accessibleLabel}
        onClick={() => {
          setError(null);
          setOpen(true);
        }}
      >
        {label}
      </button>
      <Modal open={open} title={title} onClose={() => setOpen(false)}>
        <div>{children}</div>
        <ErrorBox error={error} />
        <div className="row">
          <button
            type="button"
            className={danger ? 'primary danger-fill' : 'primary'}
            disabled={busy}
            onClick={() => {
              setBusy(true);
              setError(null);
              action().then(
                () => {
                  setBusy(false);
                  setOpen(false);
                },
                (err: unknown) => {
                  setBusy(false);
                  setError(err);
                },
              );
            }}
          >
            {confirmLabel}
          </button>
          <button type="button" onClick={() => setOpen(false)}>
            Cancel
          </button>
        </div>
      </Modal>
    </>
  );
}

/** A secret (an invite link, a pull credential) shown once, with a copy button and a dismiss. */
export function ShownOnce({
  label,
  value,
  children,
  onDone,
}: {
  label: string;
  value: string;
  children?: ReactNode;
  onDone: () => void;
}) {
  return (
    <section className="panel shown-once" aria-label={label}>
      <p>
        <strong>{label}</strong> — shown <strong>once</strong>. Copy it now; the console cannot show it again.
      </p>
      <output className="secret" aria-label={label}>
        {value}
      </output>
      {children}
      <div className="row">
        <CopyButton text={value} label={`Copy ${label.toLowerCase()}`} />
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
    </section>
  );
}

/** A small status word coloured by kind (text carries the meaning, colour only helps). */
export function Tag({ kind, children }: { kind: string; children: ReactNode }) {
  return <span className={`status status-${kind}`}>{children}</span>;
}

/** Lifetime helpers for forms: hours to seconds, whole numbers only. */
export function hoursToSeconds(hours: string): number | undefined {
  const n = Number(hours);
  if (hours.trim() === '' || !Number.isFinite(n) || n <= 0) return undefined;
  return Math.round(n * 3600);
}

/** A horizontally scrollable table region, focusable so keyboard users can scroll it. */
export function TableRegion({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section className="table-wrap admin-table" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
}
