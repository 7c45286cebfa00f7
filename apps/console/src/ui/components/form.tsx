/**
 * Form pieces every write screen shares (jobs, notifications, identity providers): a labelled
 * field that shows the engine's refusal beside the input it names (also as a ready text input,
 * text area or choice of radios), the field a 400 `{ error, field }` names, a write-only secret
 * input (blank keeps, a box clears), list splitting, the form state, the save mutation and the
 * add-or-edit panel around a form.
 */
import { type QueryKey, useMutation, useQueryClient } from '@tanstack/react-query';
import {
  type InputHTMLAttributes,
  type ReactNode,
  type TextareaHTMLAttributes,
  useEffect,
  useId,
  useRef,
  useState,
} from 'react';
import { ApiError, messageOf } from '../api/errors.ts';
import { ErrorBox, Field } from './ui.tsx';

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
      <TextField
        label={label}
        error={error}
        hint={
          editing && isSet
            ? `${setText} Leave blank to keep the one stored.`
            : editing
              ? `Not set. ${newHint}`
              : newHint
        }
        type="password"
        autoComplete="new-password"
        value={value}
        disabled={clear}
        onChange={onChange}
      />
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

/** Attributes of an input holding an identifier, URL, key or list: no autocomplete, no spell check. */
export const VERBATIM = { autoComplete: 'off', spellCheck: false } as const;

/** Attributes of an input holding a URL (with {@link VERBATIM}). */
export const URL_INPUT = { type: 'url', inputMode: 'url', ...VERBATIM } as const;

interface TextProps {
  label: string;
  hint?: ReactNode;
  error: string | undefined;
  value: string;
  onChange: (v: string) => void;
}

/** An {@link ErrorField} around a text input bound to `value`; other input attributes pass through. */
export function TextField({
  label,
  hint,
  error,
  value,
  onChange,
  ...input
}: TextProps & Omit<InputHTMLAttributes<HTMLInputElement>, keyof TextProps | 'id'>) {
  return (
    <ErrorField label={label} hint={hint} error={error}>
      {(p) => <input {...p} {...input} value={value} onChange={(e) => onChange(e.target.value)} />}
    </ErrorField>
  );
}

/** An {@link ErrorField} around a text area bound to `value` (no spell check); attributes pass through. */
export function TextAreaField({
  label,
  hint,
  error,
  value,
  onChange,
  ...area
}: TextProps & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, keyof TextProps | 'id'>) {
  return (
    <ErrorField label={label} hint={hint} error={error}>
      {(p) => (
        <textarea
          {...p}
          spellCheck={false}
          {...area}
          value={value}
          onChange={(e) => onChange(e.target.value)}
        />
      )}
    </ErrorField>
  );
}

/** A fieldset of radio buttons choosing one of `options` (each a value and its label). */
export function RadioChoice<V extends string>({
  legend,
  name,
  value,
  options,
  onChange,
}: {
  legend: string;
  /** The radio group's name, unique on the page. */
  name: string;
  value: V;
  options: readonly { value: V; label: ReactNode }[];
  onChange: (v: V) => void;
}) {
  return (
    <fieldset className="fieldset">
      <legend>{legend}</legend>
      {options.map((o) => (
        <label key={o.value} className="check">
          <input type="radio" name={name} checked={value === o.value} onChange={() => onChange(o.value)} />
          {o.label}
        </label>
      ))}
    </fieldset>
  );
}

/**
 * A form's state with a setter for one field: `[form, set, setForm]`, where `set(k, v)` replaces
 * field `k` and `setForm` takes an updater for changes to several.
 */
export function useFormState<T extends object>(init: () => T) {
  const [form, setForm] = useState<T>(init);
  const set = <K extends keyof T>(k: K, v: T[K]) => setForm((f) => ({ ...f, [k]: v }));
  return [form, set, setForm] as const;
}

/**
 * The save of an add-or-edit form: `send` posts the body; on success the queries under
 * `queryKey` are refreshed before `onSaved` gets the engine's answer. `errorAt(field)` is the
 * message of a 400 naming `field`. A write that needs step-up is confirmed by the API client in place.
 */
export function useSave<A>(
  send: (body: Record<string, unknown>) => Promise<A>,
  queryKey: QueryKey,
  onSaved: (answer: A) => void,
) {
  const client = useQueryClient();
  const save = useMutation({
    mutationFn: send,
    onSuccess: async (answer) => {
      await client.invalidateQueries({ queryKey });
      onSaved(answer);
    },
  });
  return { save, errorAt: errorsAt(save.error) };
}

/**
 * The panel around an add-or-edit form: its heading (focused when it opens, so keyboard and
 * screen-reader users land on it), an optional intro, the fields, the save error and the submit
 * and Cancel buttons. The engine is the validator, so the form sets `noValidate`.
 */
export function EditPanel({
  title,
  intro,
  submitLabel,
  pending,
  error,
  onSubmit,
  onCancel,
  children,
}: {
  title: string;
  /** Shown between the heading and the form. */
  intro?: ReactNode;
  submitLabel: string;
  /** The save is under way: the submit button is disabled. */
  pending: boolean;
  /** The save's error, shown above the buttons. */
  error: unknown;
  onSubmit: () => void;
  onCancel: () => void;
  children: ReactNode;
}) {
  const headingRef = useRef<HTMLHeadingElement>(null);
  const headingId = useId();

  useEffect(() => {
    headingRef.current?.focus();
  }, []);

  return (
    <section className="panel edit-form" aria-labelledby={headingId}>
      <h2 id={headingId} ref={headingRef} tabIndex={-1}>
        {title}
      </h2>
      {intro}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          onSubmit();
        }}
        noValidate
      >
        {children}
        <ErrorBox error={error} />
        <FormButtons submitLabel={submitLabel} pending={pending} onCancel={onCancel} />
      </form>
    </section>
  );
}

/** A write form's submit and Cancel buttons; submit is disabled while the save is under way. */
export function FormButtons({
  submitLabel,
  pending,
  onCancel,
}: {
  submitLabel: string;
  pending: boolean;
  onCancel: () => void;
}) {
  return (
    <div className="row">
      <button type="submit" className="primary" disabled={pending}>
        {submitLabel}
      </button>
      <button type="button" onClick={onCancel}>
        Cancel
      </button>
    </div>
  );
}
