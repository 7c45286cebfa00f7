/**
 * Add or edit a routing rule (`POST /admin/notify/rules`, `/rules/update`): scope (global or one
 * job), minimum severity, events (all, or a list of the 23 less the test line), channels, digest.
 * The engine's 400 `{ error, code, field }` is shown by the field it names.
 */
import { api } from '../../api/client.ts';
import { EditPanel, ErrorField, ErrorFieldset, useFormState, useSave } from '../../components/form.tsx';
import { ErrorBox } from '../../components/ui.tsx';
import { useJobs } from '../jobs/model.ts';
import {
  type ChannelView,
  type Digest,
  EVENT_CLASS_TITLES,
  NOTIFY_KEY,
  RULE_EVENTS,
  type Rule,
  SEVERITIES,
  type Severity,
} from './types.ts';

interface FormState {
  scope: string; // '' = global, else a job id
  minSeverity: Severity;
  allEvents: boolean;
  events: string[];
  channelIds: string[];
  digest: Digest;
}

function stateOf(r: Rule | undefined, channels: ChannelView[]): FormState {
  return {
    scope: r && r.scope !== 'global' ? r.scope.job : '',
    minSeverity: r?.minSeverity ?? 'info',
    allEvents: r ? r.events === 'all' : true,
    events: r && r.events !== 'all' ? r.events : [],
    channelIds: r?.channelIds ?? (channels.length === 1 ? [channels[0]!.id] : []),
    digest: r?.digest ?? 'off',
  };
}

const CLASSES = Object.keys(EVENT_CLASS_TITLES) as (keyof typeof EVENT_CLASS_TITLES)[];

export function RuleForm({
  editing,
  channels,
  onSaved,
  onCancel,
}: {
  editing?: Rule;
  channels: ChannelView[];
  onSaved: (rule: Rule) => void;
  onCancel: () => void;
}) {
  const jobs = useJobs();
  const [form, set, setForm] = useFormState<FormState>(() => stateOf(editing, channels));
  const toggleIn = (k: 'events' | 'channelIds', id: string, on: boolean) =>
    setForm((f) => ({
      ...f,
      [k]: on ? [...f[k].filter((x) => x !== id), id] : f[k].filter((x) => x !== id),
    }));

  const { save, errorAt } = useSave(
    (body) => api.post<{ rule: Rule }>(editing ? '/admin/notify/rules/update' : '/admin/notify/rules', body),
    NOTIFY_KEY,
    ({ rule }) => onSaved(rule),
  );

  const submit = () =>
    save.mutate({
      ...(editing ? { id: editing.id } : {}),
      scope: form.scope === '' ? 'global' : { job: form.scope },
      minSeverity: form.minSeverity,
      // In the order of the events table, so the rule reads the same way everywhere.
      events: form.allEvents ? 'all' : RULE_EVENTS.map((e) => e.name).filter((n) => form.events.includes(n)),
      channelIds: form.channelIds,
      digest: form.digest,
    });

  const jobIds = jobs.data?.jobs.map((j) => ({ id: j.id, name: j.name })) ?? [];
  if (form.scope !== '' && !jobIds.some((j) => j.id === form.scope))
    jobIds.push({ id: form.scope, name: undefined });

  return (
    <EditPanel
      title={editing ? `Edit rule ${editing.id}` : 'Add a rule'}
      submitLabel={editing ? 'Save rule' : 'Add rule'}
      pending={save.isPending}
      error={save.error}
      onSubmit={submit}
      onCancel={onCancel}
    >
      <div className="two-col">
        <ErrorField
          label="Scope"
          error={errorAt('scope')}
          hint="A rule for one job that selects an event sets the global rules aside for that event on that job."
        >
          {(p) => (
            <select {...p} value={form.scope} onChange={(e) => set('scope', e.target.value)}>
              <option value="">Global (every job)</option>
              {jobIds.map((j) => (
                <option key={j.id} value={j.id}>
                  Job {j.name ? `${j.name} (${j.id})` : j.id}
                </option>
              ))}
            </select>
          )}
        </ErrorField>
        <ErrorField label="Minimum severity" error={errorAt('minSeverity')}>
          {(p) => (
            <select
              {...p}
              value={form.minSeverity}
              onChange={(e) => set('minSeverity', e.target.value as Severity)}
            >
              {SEVERITIES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </ErrorField>
        <ErrorField
          label="Digest"
          error={errorAt('digest')}
          hint="Batches success events into one summary per channel (daily at 08:00 UTC, weekly on Mondays). Problems are always sent at once."
        >
          {(p) => (
            <select {...p} value={form.digest} onChange={(e) => set('digest', e.target.value as Digest)}>
              <option value="off">off</option>
              <option value="daily">daily</option>
              <option value="weekly">weekly</option>
            </select>
          )}
        </ErrorField>
      </div>

      <ErrorFieldset legend="Channels" error={errorAt('channelIds')}>
        {channels.length === 0 ? <p className="muted">Add a channel first.</p> : null}
        <div className="notify-checks">
          {channels.map((c) => (
            <label key={c.id} className="check">
              <input
                type="checkbox"
                checked={form.channelIds.includes(c.id)}
                onChange={(e) => toggleIn('channelIds', c.id, e.target.checked)}
              />
              {c.name}
              {c.enabled ? '' : ' (disabled)'}
            </label>
          ))}
          {/* Ids of channels deleted since: the engine refuses them on save, so they can be unticked. */}
          {form.channelIds
            .filter((id) => !channels.some((c) => c.id === id))
            .map((id) => (
              <label key={id} className="check">
                <input type="checkbox" checked onChange={() => toggleIn('channelIds', id, false)} />
                {id} (deleted)
              </label>
            ))}
        </div>
      </ErrorFieldset>

      <ErrorFieldset legend="Events" error={errorAt('events')}>
        <label className="check">
          <input
            type="radio"
            name="rule-events"
            checked={form.allEvents}
            onChange={() => set('allEvents', true)}
          />
          All events (success events only under a digest, or when raised to warning)
        </label>
        <label className="check">
          <input
            type="radio"
            name="rule-events"
            checked={!form.allEvents}
            onChange={() => set('allEvents', false)}
          />
          Only the events chosen below
        </label>
        {form.allEvents
          ? null
          : CLASSES.map((cls) => (
              <fieldset key={cls} className="fieldset notify-events">
                <legend>{EVENT_CLASS_TITLES[cls]}</legend>
                <div className="notify-checks">
                  {RULE_EVENTS.filter((e) => e.class === cls).map((e) => (
                    <label key={e.name} className="check">
                      <input
                        type="checkbox"
                        checked={form.events.includes(e.name)}
                        onChange={(ev) => toggleIn('events', e.name, ev.target.checked)}
                      />
                      <span>
                        {e.name} <span className="muted">({e.severity})</span>
                      </span>
                    </label>
                  ))}
                </div>
              </fieldset>
            ))}
      </ErrorFieldset>

      <ErrorBox error={jobs.error} />
    </EditPanel>
  );
}
