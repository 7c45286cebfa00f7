/**
 * Pieces of a screen that lists what the engine keeps and edits it in place (identity providers,
 * notifications): a list section with its heading and add button, and which add-or-edit form is open.
 */
import { type ReactNode, useId, useState } from 'react';

/**
 * A section of a screen that lists things (connections, channels, rules, deliveries): its heading,
 * with a button beside it while `action` is given (an add button is left out while its form is open).
 */
export function ListSection({
  title,
  action,
  children,
}: {
  title: string;
  action?: { label: string; primary?: boolean; disabled?: boolean; onClick: () => void } | undefined;
  children: ReactNode;
}) {
  const id = useId();
  return (
    <section aria-labelledby={id}>
      <div className="section-head">
        <h2 id={id}>{title}</h2>
        {action ? (
          <button
            type="button"
            className={action.primary ? 'primary' : undefined}
            disabled={action.disabled}
            onClick={action.onClick}
          >
            {action.label}
          </button>
        ) : null}
      </div>
      {children}
    </section>
  );
}

/** Which form a list screen shows: none, the add form, or the edit form of one item. */
export type Editor<T> = { mode: 'add' } | { mode: 'edit'; item: T } | null;

/**
 * The {@link Editor} a list screen shows: `[editor, open, close]`; `open` calls `onOpening` first
 * (a screen clears its last message there).
 */
export function useEditor<T>(onOpening: () => void) {
  const [editor, setEditor] = useState<Editor<T>>(null);
  const open = (e: Editor<T>) => {
    onOpening();
    setEditor(e);
  };
  return [editor, open, () => setEditor(null)] as const;
}

/** The key of an open {@link Editor}'s form: one per item, so opening another starts afresh. */
export function editorKey<T extends { id: string }>(
  editor: { mode: 'add' } | { mode: 'edit'; item: T },
): string {
  return editor.mode === 'edit' ? editor.item.id : 'add';
}

/** The props an add-or-edit form gets from an open {@link Editor}: the item to edit, if any. */
export function editorProps<T>(editor: { mode: 'add' } | { mode: 'edit'; item: T }): { editing?: T } {
  return editor.mode === 'edit' ? { editing: editor.item } : {};
}
