/** Form pieces of the Notifications screen: a labelled field that shows the engine's refusal by it. */
import type { ReactNode } from 'react';
import { Field } from '../../components/ui.tsx';

export interface InputProps {
  id: string;
  'aria-describedby'?: string;
  'aria-invalid'?: true;
}

/** A labelled input; when the engine's 400 names this field (`field`), its message is shown here. */
export function NotifyField({
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
              <small id={errId} className="notify-field-error">
                {error}
              </small>
            ) : null}
          </>
        );
      }}
    </Field>
  );
}

/** Splits a list typed one per line or separated by commas. */
export function splitList(s: string): string[] {
  return s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter((x) => x !== '');
}
