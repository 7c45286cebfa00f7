/**
 * Form pieces every write screen shares (jobs, notifications, identity providers): a labelled
 * field that shows the engine's refusal beside the input it names, the field a 400
 * `{ error, field }` names, a write-only secret input (blank keeps, a box clears) and list splitting.
 */
import { type ReactNode, useId } from 'react';
import { ApiError, messageOf } from '../api/errors.ts';
import { Field } from './ui.tsx';

/** What a field hands its input: the id the label points at, the hint and error it is described by. */
export interface InputProps {
  id: string;
  'aria-describedby'?: string;
  'aria-invalid'?: true;
}

/** A labelled input; when the engine's 400 names this field, `error` is shown under it. */
export function ErrorField({
  label,
  hint,
  error,
  children,
}: {
  label: string;
  hint?: ReactNode;
  error: string | undefined;
  children: (props: InputProps) => ReactNode;
}) {
  return (
    <Field label={label} hint={hint}>
      {(id, hintId) => {
        const errId = `${id}-error`;
        const describedBy = [error ? errId : undefined, hintId].filter(Boolean).join(' ');
        return (
          <>
            {children({
              id,
              ...(describedBy ? { 'aria-describedby': describedBy } : {}),
              ...(error ? { 'aria-invalid': true as const } : {}),
            })}
            {error ? (
              <small id={errId} className="field-error">
                {error}
              </small>
            ) : null}
          </>
        );
      }}
    </Field>
  );
}

/** A group of inputs with a legend, marked invalid (with the engine's message) as one. */
export function ErrorFieldset({
  legend,
  error,
  className,
  children,
}: {
  legend: string;
  error: string | undefined;
  className?: string;
  children: ReactNode;
}) {
  const errId = useId();
  return (
    <fieldset
      className={className ? `fieldset ${className}` : 'fieldset'}
      aria-describedby={error ? errId : undefined}
      aria-invalid={error ? true : undefined}
    >
      <legend>{legend}</legend>
      {children}
      {error ? (
        <small id={errId} className="field-error">
          {error}
        </small>
      ) : null}
    </fieldset>
  );
}

/** The input field a 400 `{ error, field }` names, when it names one. */
export function fieldOfError(err: unknown): string | undefined {
  if (!(err instanceof ApiError) || err.status !== 400) return undefined;
  const body = err.body as { field?: unknown } | undefined;
  return typeof body?.field === 'string' && body.field !== '' ? body.field : undefined;
}

/** `errorAt(field)`: the message of `err` when its 400 names `field`, else undefined. */
export function errorsAt(err: unknown): (field: string) => string | undefined {
  const named = fieldOfError(err);
  return (field) => (named !== undefined && named === field ? messageOf(err) : undefined);
}

/**
 * A write-only secret: the value is never shown; on edit a blank input keeps the stored one and a
 * box clears it. `value` is the text typed, `clear` the box.
 */
export function SecretInput({
  label,
  isSet,
  setText,
  editing,
  value,
  clear,
  error,
  newHint,
  clearLabel,
  onChange,
  onClear,
}: {
  label: string;
  /** A value is stored (only known when editing). */
  isSet: boolean;
  /** Says a value is stored ("A signing secret is set."). */
  setText: string;
  editing: boolean;
  value: string;
  clear: boolean;
  error: string | undefined;
  /** The hint when nothing is stored yet. */
  newHint: string;
  clearLabel: string;
  onChange: (v: string) => void;
  onClear: (v: boolean) => void;
}) {
  return (
    <>
      <ErrorField
        label={label}
        error={error}
        hint={
          editing && isSet
            ? `${setText} Leave blank to keep the one stored.`
            : editing
              ? `Not set. ${newHint}`
              : newHint
        }
      >
        {(p) => (
          <input
            {...p}
            type="password"
            autoComplete="new-password"
            value={value}
            disabled={clear}
            onChange={(e) => onChange(e.target.value)}
          />
        )}
      </ErrorField>
      {editing && isSet ? (
        <label className="check">
          <input type="checkbox" checked={clear} onChange={(e) => onClear(e.target.checked)} />
          {clearLabel}
        </label>
      ) : null}
    </>
  );
}

/**
 * The value to send for a write-only secret: omitted (keep), a string (replace) or null (clear).
 * On create a blank field is omitted.
 */
export function secretBody(
  value: string,
  clear: boolean,
): { set: false } | { set: true; value: string | null } {
  if (clear) return { set: true, value: null };
  if (value !== '') return { set: true, value };
  return { set: false };
}

/** Splits a list typed one per line or separated by commas. */
export function splitList(s: string): string[] {
  return s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter((x) => x !== '');
}
