/**
 * Pieces the admin screens share: a confirmed action button, the actions of a listed item (test,
 * edit, enable or disable, delete), a secret shown once, a status tag.
 */
import { type QueryKey, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { api } from '../../api/client.ts';
import { CopyButton, ErrorBox, Modal, useRunner } from '../../components/ui.tsx';
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

/**
 * The actions of one item in a list the engine keeps (an identity-provider connection, a
 * notification channel or rule): an optional test, Edit, Enable or Disable when the item has that
 * state, and Delete after a confirmation whose text is `children`. Enabling posts
 * `{ id, enabled }` to `${path}/update`, deleting `{ id }` to `${path}/delete`; both refresh the
 * queries under `queryKey` and say what happened through `onDone`. The test and the toggle run one
 * at a time; `result` (the test's outcome) and their error are shown under the buttons.
 */
export function ItemActions({
  path,
  queryKey,
  id,
  name,
  subject,
  enabled,
  test,
  result,
  deleteTitle,
  confirmLabel,
  onEdit,
  onDone,
  children,
}: {
  /** The engine's path for the list, e.g. `/admin/notify/channels`. */
  path: string;
  queryKey: QueryKey;
  id: string;
  /** Names the item in the buttons' accessible labels: "Edit {name}", "Disable {name}". */
  name: string;
  /** Names it in the messages: "{subject} is disabled.", "{subject} was deleted." */
  subject: string;
  /** Whether it is enabled; absent when it cannot be switched (no Enable or Disable button). */
  enabled?: boolean;
  test?: { label: string; busyLabel: string; accessibleLabel: string; run: () => Promise<void> };
  result?: ReactNode;
  deleteTitle: string;
  confirmLabel: string;
  onEdit: () => void;
  onDone: (message: string) => void;
  /** What deleting does, in the confirmation. */
  children: ReactNode;
}) {
  const client = useQueryClient();
  const { busy, error, run } = useRunner<'test' | 'toggle'>();

  const toggle = () =>
    run(async () => {
      await api.post(`${path}/update`, { id, enabled: !enabled });
      await client.invalidateQueries({ queryKey });
      onDone(`${subject} is ${enabled ? 'disabled' : 'enabled'}.`);
    }, 'toggle');

  return (
    <>
      <div className="cell-actions">
        {test ? (
          <button
            type="button"
            aria-label={test.accessibleLabel}
            disabled={busy !== null}
            onClick={() => void run(test.run, 'test')}
          >
            {busy === 'test' ? test.busyLabel : test.label}
          </button>
        ) : null}
        <button type="button" aria-label={`Edit ${name}`} onClick={onEdit}>
          Edit
        </button>
        {enabled === undefined ? null : (
          <button
            type="button"
            aria-label={`${enabled ? 'Disable' : 'Enable'} ${name}`}
            disabled={busy !== null}
            onClick={() => void toggle()}
          >
            {enabled ? 'Disable' : 'Enable'}
          </button>
        )}
        <ConfirmButton
          label="Delete"
          accessibleLabel={`Delete ${name}`}
          title={deleteTitle}
          confirmLabel={confirmLabel}
          danger
          action={async () => {
            const r = await api.post<{ deleted: boolean }>(`${path}/delete`, { id });
            await client.invalidateQueries({ queryKey });
            onDone(r.deleted ? `${subject} was deleted.` : `${subject} was already gone.`);
          }}
        >
          {children}
        </ConfirmButton>
      </div>
      {result}
      <ErrorBox error={error} />
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
