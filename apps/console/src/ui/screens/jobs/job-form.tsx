/**
 * Create and edit a job: the whole object of `POST /admin/jobs`. The engine is the validator (the
 * form sets `noValidate`): its 400 is shown above the buttons and next to the field it names. An
 * edit sends `ifMatchRev` = the revision it loaded; the engine's 409 is shown as "changed by
 * someone else" with the changed fields (the engine's `changedFields`, and the difference between
 * what the form loaded and the job as it is now) and a button that reloads the current job.
 * Creating sends `ifMatchRev: null`, so an existing id is refused instead of overwritten.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client.ts';
import { messageOf } from '../../api/errors.ts';
import { can, useSignedIn } from '../../auth/session.tsx';
import { ErrorField, FormButtons } from '../../components/form.tsx';
import { ErrorBox, formatTime } from '../../components/ui.tsx';
import {
  changedFields,
  configOf,
  describeSeconds,
  fieldLabel,
  fieldOfError,
  JOBS_KEY,
  type JobConfig,
  type JobRow,
  type JobSource,
  type PendingChangeReply,
  type PreconditionRefusal,
  preconditionOf,
  type SourceType,
  type UpsertBody,
  type UpsertReply,
  useConnections,
  useDestinations,
} from './model.ts';

interface FormState {
  id: string;
  name: string;
  cadence: string;
  paused: boolean;
  sourceType: SourceType;
  path: string;
  include: string;
  exclude: string;
  tables: string;
  connection: string;
  db: string;
  keyPrefix: string;
  bucket: string;
  prefix: string;
  destinations: string[];
  keepLast: string;
  keepDays: string;
  skipUnchanged: boolean;
  maxEntries: string;
  restoreTest: string;
}

const str = (n: number | undefined | null) => (n === undefined || n === null ? '' : String(n));
const lines = (a: string[] | undefined) => (a ?? []).join('\n');

function stateOf(job: JobConfig | undefined): FormState {
  const s = job?.source;
  return {
    id: job?.id ?? '',
    name: job?.name ?? '',
    cadence: job ? String(job.cadenceSeconds) : '86400',
    paused: job ? !job.enabled : false,
    sourceType: s?.type ?? 'files',
    path: s && (s.type === 'files' || s.type === 'sqlite') ? s.path : '',
    include: s?.type === 'files' ? lines(s.include) : '',
    exclude: s?.type === 'files' ? lines(s.exclude) : '',
    tables: s?.type === 'sqlite' ? lines(s.tables) : '',
    connection: s && (s.type === 'redis' || s.type === 's3') ? s.connection : '',
    db: s?.type === 'redis' ? str(s.db) : '',
    keyPrefix: s?.type === 'redis' ? (s.keyPrefix ?? '') : '',
    bucket: s?.type === 's3' ? s.bucket : '',
    prefix: s?.type === 's3' ? (s.prefix ?? '') : '',
    destinations: job?.destinations ?? ['default'],
    keepLast: str(job?.retention?.keepLast),
    keepDays: str(job?.retention?.keepDays),
    skipUnchanged: job?.skipUnchanged ?? false,
    maxEntries: str(job?.maxEntries),
    restoreTest: str(job?.restoreTestCadenceSeconds),
  };
}

/**
 * A number field as the engine should see it: empty = absent; a number as a number; anything
 * else is sent as typed so the engine's own rule ("must be integer") answers it.
 */
function num(s: string): number | undefined {
  const t = s.trim();
  if (t === '') return undefined;
  const n = Number(t);
  return (Number.isFinite(n) ? n : t) as number;
}
const list = (s: string) =>
  s
    .split('\n')
    .map((x) => x.trim())
    .filter((x) => x !== '');

function sourceOf(f: FormState): JobSource {
  switch (f.sourceType) {
    case 'files': {
      const src: JobSource = { type: 'files', path: f.path.trim() };
      if (list(f.include).length) src.include = list(f.include);
      if (list(f.exclude).length) src.exclude = list(f.exclude);
      return src;
    }
    case 'sqlite': {
      const src: JobSource = { type: 'sqlite', path: f.path.trim() };
      if (list(f.tables).length) src.tables = list(f.tables);
      return src;
    }
    case 'redis': {
      const src: JobSource = { type: 'redis', connection: f.connection };
      const db = num(f.db);
      if (db !== undefined) src.db = db;
      if (f.keyPrefix !== '') src.keyPrefix = f.keyPrefix;
      return src;
    }
    case 's3': {
      const src: JobSource = { type: 's3', connection: f.connection, bucket: f.bucket.trim() };
      if (f.prefix !== '') src.prefix = f.prefix;
      return src;
    }
  }
}

function bodyOf(
  f: FormState,
  loaded: JobConfig | undefined,
  baseRev: number | null,
  mayChangeRestoreTest: boolean,
): UpsertBody {
  const body: UpsertBody = {
    id: f.id.trim(),
    cadenceSeconds: num(f.cadence) as number,
    enabled: !f.paused,
    source: sourceOf(f),
    destinations: f.destinations,
    restoreTestCadenceSeconds: mayChangeRestoreTest
      ? (num(f.restoreTest) ?? null)
      : (loaded?.restoreTestCadenceSeconds ?? null),
    ifMatchRev: baseRev,
  };
  if (f.name.trim() !== '') body.name = f.name.trim();
  const keepLast = num(f.keepLast);
  const keepDays = num(f.keepDays);
  if (keepLast !== undefined || keepDays !== undefined)
    body.retention = {
      ...(keepLast !== undefined ? { keepLast } : {}),
      ...(keepDays !== undefined ? { keepDays } : {}),
    };
  if (f.skipUnchanged || loaded?.skipUnchanged !== undefined) body.skipUnchanged = f.skipUnchanged;
  const maxEntries = num(f.maxEntries);
  if (maxEntries !== undefined) body.maxEntries = maxEntries;
  return body;
}

interface Conflict {
  precondition: PreconditionRefusal['precondition'];
  message: string;
  fields: string[];
  current: JobRow | null;
}

export function JobForm({
  mode,
  initial,
  initialRev,
  onSaved,
  onCancel,
}: {
  mode: 'create' | 'edit';
  initial?: JobConfig;
  initialRev?: number;
  /** The write applied (200), or was held for a second person (202 under configuration approval). */
  onSaved: (reply: UpsertReply | PendingChangeReply) => void;
  onCancel: () => void;
}) {
  const who = useSignedIn();
  const client = useQueryClient();
  const mayChangeRestoreTest = can(who, 'scheduledtest.config');
  const [loaded, setLoaded] = useState<JobConfig | undefined>(initial);
  const [baseRev, setBaseRev] = useState<number | null>(mode === 'edit' ? (initialRev ?? null) : null);
  const [form, setForm] = useState<FormState>(() => stateOf(initial));
  const [conflict, setConflict] = useState<Conflict | null>(null);
  const destinations = useDestinations();
  const needsConnections = form.sourceType === 'redis' || form.sourceType === 's3';
  const connections = useConnections(needsConnections);
  const set = <K extends keyof FormState>(k: K, v: FormState[K]) => setForm((f) => ({ ...f, [k]: v }));

  const save = useMutation({
    mutationFn: (body: UpsertBody) => api.post<UpsertReply | PendingChangeReply>('/admin/jobs', body),
    onMutate: () => setConflict(null),
    onSuccess: async (reply) => {
      await client.invalidateQueries({ queryKey: JOBS_KEY });
      onSaved(reply);
    },
    onError: async (err) => {
      const precondition = preconditionOf(err);
      if (!precondition) return;
      // What the job is now, to name what changed since this form loaded it.
      let current: JobRow | null = null;
      try {
        const { jobs } = await api.get<{ jobs: JobRow[] }>('/admin/jobs');
        client.setQueryData(JOBS_KEY, { jobs });
        current = jobs.find((j) => j.id === precondition.id) ?? null;
      } catch {
        // the engine's own changedFields still name the fields
      }
      const fields = new Set(precondition.changedFields);
      if (current && loaded) for (const k of changedFields(loaded, configOf(current))) fields.add(k);
      setConflict({ precondition, message: messageOf(err), fields: [...fields].sort(), current });
    },
  });

  const reload = () => {
    if (!conflict?.current) return;
    const fresh = configOf(conflict.current);
    setLoaded(fresh);
    setBaseRev(conflict.current.configRev);
    setForm(stateOf(fresh));
    setConflict(null);
    save.reset();
  };

  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(bodyOf(form, loaded, baseRev, mayChangeRestoreTest));
  };

  const fieldError = conflict ? null : fieldOfError(save.error);
  const errorFor = (...keys: string[]) =>
    fieldError && keys.includes(fieldError.field) ? capitalise(fieldError.message) : undefined;
  const cadence = num(form.cadence);

  const destinationIds = [
    ...new Set([...(destinations.data?.destinations.map((d) => d.id) ?? []), ...form.destinations]),
  ];
  const connectionIds = [
    ...new Set([
      ...(connections.data?.connections.filter((c) => c.type === form.sourceType).map((c) => c.id) ?? []),
      ...(form.connection ? [form.connection] : []),
    ]),
  ];

  return (
    <form
      className="job-form edit-form"
      noValidate
      onSubmit={submit}
      aria-label={mode === 'create' ? 'New job' : 'Edit job'}
    >
      <fieldset>
        <legend>Job</legend>
        <ErrorField
          label="ID"
          hint={
            mode === 'create'
              ? 'Letters, digits, dot, underscore, hyphen; 1 to 64. It cannot change later.'
              : 'The job id cannot change.'
          }
          error={errorFor('id')}
        >
          {(p) => (
            <input
              {...p}
              value={form.id}
              readOnly={mode === 'edit'}
              autoComplete="off"
              spellCheck={false}
              onChange={(e) => set('id', e.target.value)}
            />
          )}
        </ErrorField>
        <ErrorField label="Name" hint="Optional display name." error={errorFor('name')}>
          {(p) => <input {...p} value={form.name} onChange={(e) => set('name', e.target.value)} />}
        </ErrorField>
        <ErrorField
          label="Cadence (seconds)"
          hint={`How often it runs: 60 seconds to 366 days.${
            typeof cadence === 'number' && Number.isFinite(cadence)
              ? ` Now: every ${describeSeconds(cadence)}.`
              : ''
          }`}
          error={errorFor('cadenceSeconds')}
        >
          {(p) => (
            <input
              {...p}
              inputMode="numeric"
              value={form.cadence}
              onChange={(e) => set('cadence', e.target.value)}
            />
          )}
        </ErrorField>
        <label className="check">
          <input type="checkbox" checked={form.paused} onChange={(e) => set('paused', e.target.checked)} />
          Paused (no scheduled or manual runs)
        </label>
      </fieldset>

      <fieldset>
        <legend>Source</legend>
        <ErrorField label="Source type" error={errorFor('source')}>
          {(p) => (
            <select
              {...p}
              value={form.sourceType}
              onChange={(e) => set('sourceType', e.target.value as SourceType)}
            >
              <option value="files">Files (a directory tree)</option>
              <option value="sqlite">SQLite database file</option>
              <option value="redis">Redis (a configured connection)</option>
              <option value="s3">S3 bucket (a configured connection)</option>
            </select>
          )}
        </ErrorField>
        {form.sourceType === 'files' || form.sourceType === 'sqlite' ? (
          <ErrorField
            label={form.sourceType === 'files' ? 'Directory path' : 'Database file path'}
            hint="An absolute path on the engine's host."
            error={errorFor('source.path')}
          >
            {(p) => (
              <input
                {...p}
                value={form.path}
                spellCheck={false}
                autoComplete="off"
                onChange={(e) => set('path', e.target.value)}
              />
            )}
          </ErrorField>
        ) : null}
        {form.sourceType === 'files' ? (
          <div className="two-col">
            <ErrorField
              label="Include"
              hint="Prefix selectors, one a line (optional)."
              error={errorFor('source.include')}
            >
              {(p) => (
                <textarea {...p} value={form.include} onChange={(e) => set('include', e.target.value)} />
              )}
            </ErrorField>
            <ErrorField
              label="Exclude"
              hint="Prefix selectors, one a line (optional)."
              error={errorFor('source.exclude')}
            >
              {(p) => (
                <textarea {...p} value={form.exclude} onChange={(e) => set('exclude', e.target.value)} />
              )}
            </ErrorField>
          </div>
        ) : null}
        {form.sourceType === 'sqlite' ? (
          <ErrorField
            label="Tables"
            hint="Table names, one a line (optional: all)."
            error={errorFor('source.tables')}
          >
            {(p) => <textarea {...p} value={form.tables} onChange={(e) => set('tables', e.target.value)} />}
          </ErrorField>
        ) : null}
        {needsConnections ? (
          <ErrorField
            label="Connection"
            hint={
              connections.data && connectionIds.length === 0
                ? `No ${form.sourceType} connection is configured: the deployment defines them (ENGINE_CONNECTIONS_FILE).`
                : 'Endpoints and credentials come from the deployment, never from a job.'
            }
            error={errorFor('source.connection')}
          >
            {(p) => (
              <select {...p} value={form.connection} onChange={(e) => set('connection', e.target.value)}>
                <option value="">Choose a connection</option>
                {connectionIds.map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            )}
          </ErrorField>
        ) : null}
        <ErrorBox error={connections.error} />
        {form.sourceType === 'redis' ? (
          <div className="two-col">
            <ErrorField label="Database number" hint="0 to 1023 (optional)." error={errorFor('source.db')}>
              {(p) => (
                <input
                  {...p}
                  inputMode="numeric"
                  value={form.db}
                  onChange={(e) => set('db', e.target.value)}
                />
              )}
            </ErrorField>
            <ErrorField label="Key prefix" hint="Optional." error={errorFor('source.keyPrefix')}>
              {(p) => (
                <input {...p} value={form.keyPrefix} onChange={(e) => set('keyPrefix', e.target.value)} />
              )}
            </ErrorField>
          </div>
        ) : null}
        {form.sourceType === 's3' ? (
          <div className="two-col">
            <ErrorField label="Bucket" error={errorFor('source.bucket')}>
              {(p) => <input {...p} value={form.bucket} onChange={(e) => set('bucket', e.target.value)} />}
            </ErrorField>
            <ErrorField label="Prefix" hint="Optional." error={errorFor('source.prefix')}>
              {(p) => <input {...p} value={form.prefix} onChange={(e) => set('prefix', e.target.value)} />}
            </ErrorField>
          </div>
        ) : null}
      </fieldset>

      <fieldset aria-describedby={errorFor('destinations') ? 'job-destinations-error' : undefined}>
        <legend>Destinations</legend>
        <ErrorBox error={destinations.error} onRetry={() => void destinations.refetch()} />
        {destinationIds.map((d) => {
          const info = destinations.data?.destinations.find((x) => x.id === d);
          return (
            <label key={d} className="check">
              <input
                type="checkbox"
                checked={form.destinations.includes(d)}
                onChange={(e) =>
                  set(
                    'destinations',
                    e.target.checked ? [...form.destinations, d] : form.destinations.filter((x) => x !== d),
                  )
                }
              />
              <span>
                {d}
                {info ? (
                  <span className="muted"> · {info.kind === 'fs' ? 'local filesystem' : 'S3'}</span>
                ) : null}
                {info?.default ? <span className="muted"> (default)</span> : null}
              </span>
            </label>
          );
        })}
        {errorFor('destinations') ? (
          <small id="job-destinations-error" className="field-error">
            {errorFor('destinations')}
          </small>
        ) : null}
      </fieldset>

      <fieldset>
        <legend>Retention and limits</legend>
        <div className="two-col">
          <ErrorField
            label="Keep last (runs)"
            hint="1 to 100000; empty with Keep days empty keeps every run."
            error={errorFor('retention.keepLast', 'retention')}
          >
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={form.keepLast}
                onChange={(e) => set('keepLast', e.target.value)}
              />
            )}
          </ErrorField>
          <ErrorField label="Keep days" hint="1 to 36500." error={errorFor('retention.keepDays')}>
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={form.keepDays}
                onChange={(e) => set('keepDays', e.target.value)}
              />
            )}
          </ErrorField>
          <ErrorField
            label="Listing cap (entries)"
            hint="Most entries one run may list (default 2,000,000)."
            error={errorFor('maxEntries')}
          >
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={form.maxEntries}
                onChange={(e) => set('maxEntries', e.target.value)}
              />
            )}
          </ErrorField>
          <ErrorField
            label="Restore-test cadence (seconds)"
            hint={
              mayChangeRestoreTest
                ? 'Empty = off; 3600 seconds to 366 days.'
                : 'Changing it needs the scheduledtest.config capability.'
            }
            error={errorFor('restoreTestCadenceSeconds')}
          >
            {(p) => (
              <input
                {...p}
                inputMode="numeric"
                value={form.restoreTest}
                disabled={!mayChangeRestoreTest}
                onChange={(e) => set('restoreTest', e.target.value)}
              />
            )}
          </ErrorField>
        </div>
        <label className="check">
          <input
            type="checkbox"
            checked={form.skipUnchanged}
            onChange={(e) => set('skipUnchanged', e.target.checked)}
          />
          Skip unchanged sources (files and S3: record an unchanged run without a new archive)
        </label>
      </fieldset>

      {conflict ? <ConflictBox conflict={conflict} onReload={reload} onCancel={onCancel} /> : null}
      {save.error && !conflict ? <ErrorBox error={save.error} /> : null}

      <FormButtons
        submitLabel={save.isPending ? 'Saving…' : mode === 'create' ? 'Create job' : 'Save changes'}
        pending={save.isPending}
        onCancel={onCancel}
      />
    </form>
  );
}

function capitalise(s: string): string {
  return s ? s[0]!.toUpperCase() + s.slice(1) : s;
}

function ConflictBox({
  conflict,
  onReload,
  onCancel,
}: {
  conflict: Conflict;
  onReload: () => void;
  onCancel: () => void;
}) {
  const p = conflict.precondition;
  if (p.reason === 'base-moved' && conflict.current) {
    return (
      <div className="msg msg-error conflict" role="alert">
        <p>
          <strong>This job was changed by someone else</strong> since you opened it
          {p.yourRev !== undefined && p.yourRev !== null
            ? ` (revision ${p.yourRev} → ${p.currentRev ?? '?'})`
            : ''}
          {p.changedAt ? `, at ${formatTime(p.changedAt)}` : ''}. Nothing was saved.
        </p>
        {conflict.fields.length > 0 ? (
          <p>
            Changed: <span className="changed-fields">{conflict.fields.map(fieldLabel).join(', ')}</span>.
          </p>
        ) : null}
        <p className="muted">{conflict.message}</p>
        <div className="row">
          <button type="button" className="primary" onClick={onReload}>
            Reload the job
          </button>
          <span className="muted">Reloading replaces your unsaved edits with the current job.</span>
        </div>
      </div>
    );
  }
  if (p.reason === 'deleted-under-you' || (p.reason === 'base-moved' && !conflict.current)) {
    return (
      <div className="msg msg-error conflict" role="alert">
        <p>
          <strong>This job was deleted by someone else</strong> since you opened it. Nothing was saved.
        </p>
        <p className="muted">{conflict.message}</p>
        <button type="button" onClick={onCancel}>
          Back
        </button>
      </div>
    );
  }
  return (
    <div className="msg msg-error conflict" role="alert">
      <p>{conflict.message}</p>
    </div>
  );
}
