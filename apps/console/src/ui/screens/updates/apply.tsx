/**
 * Applying the channel's release, for owners (`keys.ceremony`; every write needs step-up, asked
 * for in place): the components and options, a dry run (every check up to the upload, nothing
 * changed), the one-shot deploy token (minted with step-up and shown once; it also fills the
 * token field here), and a live apply or ramp that sends it in `x-engine-deploy-token`. The token
 * is used up by the first live step that presents it, whatever the outcome, so the field is
 * cleared after each one.
 */
import { useId, useState } from 'react';
import { api } from '../../api/client.ts';
import { RadioChoice } from '../../components/form.tsx';
import { ErrorBox, Field, formatTime, useRunner } from '../../components/ui.tsx';
import { ConfirmButton, ShownOnce } from '../admin/common.tsx';
import { LifecycleResult } from './result.tsx';
import { sendWithToken } from './steps.ts';
import type { Component, DeployToken, LifecycleReply, UpdateStatus, UpdatesView } from './types.ts';

export interface TokenState {
  token: string;
  setToken: (t: string) => void;
}

/** The deploy token: mint one (step-up, shown once) or paste one minted elsewhere. */
export function DeployTokenPanel({ token, setToken }: TokenState) {
  const [minted, setMinted] = useState<DeployToken | null>(null);
  const { busy, error, run } = useRunner();
  const headingId = useId();
  return (
    <section className="panel" aria-labelledby={headingId}>
      <h3 id={headingId}>Deploy token</h3>
      <p className="muted">
        A live apply, a live ramp and settling a ramp need a one-shot deploy token. Getting one asks you to
        confirm it is you; it is valid 15 minutes, works once, and getting a new one replaces the old one.
      </p>
      <div className="row">
        <button
          type="button"
          disabled={busy !== null}
          onClick={() =>
            void run(async () => {
              const t = await api.post<DeployToken>('/admin/update/deploy-token', {});
              setMinted(t);
              setToken(t.token);
            })
          }
        >
          {busy ? 'Getting a token…' : 'Get a deploy token'}
        </button>
      </div>
      <ErrorBox error={error} />
      {minted ? (
        <ShownOnce label="Deploy token" value={minted.token} onDone={() => setMinted(null)}>
          <p>
            Valid until {formatTime(minted.expiresAt)}, for one live step. It is filled in below for this
            browser; elsewhere present it in the <code>{minted.header}</code> header.
          </p>
        </ShownOnce>
      ) : null}
      <Field
        label="Deploy token for the next live step"
        hint="Filled in when you get one here; or paste one."
      >
        {(id, hint) => (
          <input
            id={id}
            aria-describedby={hint}
            type="password"
            autoComplete="off"
            spellCheck={false}
            value={token}
            onChange={(e) => setToken(e.target.value)}
          />
        )}
      </Field>
    </section>
  );
}

/** Dry run, live apply and ramp of the channel's release. */
export function ApplyPanel({
  view,
  status,
  token,
  setToken,
  onReply,
}: TokenState & {
  view: UpdatesView;
  status: UpdateStatus | undefined;
  onReply: (r: LifecycleReply) => Promise<void>;
}) {
  const offered = (view.components ?? []).map((c) => c.component);
  const [picked, setPicked] = useState<Component[]>(offered);
  const [allowDowngrade, setAllowDowngrade] = useState(false);
  const [readBack, setReadBack] = useState<'warn' | 'enforce'>('warn');
  const [percentage, setPercentage] = useState('10');
  const [reply, setReply] = useState<{ title: string; reply: LifecycleReply } | null>(null);
  const { busy, error, run } = useRunner<'dry' | 'ramp-dry'>();
  const headingId = useId();

  const body = (dryRun: boolean) => ({
    dryRun,
    // Every component the channel offers is the engine's default: send the list only when narrowed.
    ...(picked.length > 0 && picked.length < offered.length ? { components: picked } : {}),
    ...(allowDowngrade ? { allowDowngrade: true } : {}),
    readBack,
  });
  const rampBody = (dryRun: boolean) => ({
    percentage: Number(percentage),
    dryRun,
    components: ['engine'],
    ...(allowDowngrade ? { allowDowngrade: true } : {}),
    readBack,
  });

  const step = async (title: string, path: string, b: Record<string, unknown>, live: boolean) => {
    setReply(null);
    const r = await sendWithToken(path, b, live, token, () => setToken(''));
    setReply({ title, reply: r });
    await onReply(r);
  };

  const liveBlocked = token.trim() === '';
  const toggle = (c: Component, on: boolean) =>
    setPicked((p) => (on ? [...p.filter((x) => x !== c), c] : p.filter((x) => x !== c)));

  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Apply the channel's release</h2>
      <p className="muted">
        A dry run runs every check up to the upload (the floors, forward-only, schema epoch, migration and
        compatibility guards, the artefacts downloaded and checked against the signed channel) and changes
        nothing. A live apply then places the release inert under the engine's data directory.
        {status?.promote === 'unavailable'
          ? ' This engine version stops after the upload: promote is not available yet.'
          : status?.promote === 'restart'
            ? ' It then switches to the new release and the engine restarts into it; this screen waits until it answers again.'
            : ''}
      </p>
      <DeployTokenPanel token={token} setToken={setToken} />
      <div className="panel">
        {offered.length > 0 ? (
          <fieldset className="fieldset">
            <legend>Components</legend>
            {offered.map((c) => (
              <label key={c} className="check">
                <input
                  type="checkbox"
                  checked={picked.includes(c)}
                  onChange={(e) => toggle(c, e.target.checked)}
                />
                {c}
              </label>
            ))}
          </fieldset>
        ) : null}
        <label className="check">
          <input
            type="checkbox"
            checked={allowDowngrade}
            onChange={(e) => setAllowDowngrade(e.target.checked)}
          />
          Allow a downgrade (never below the floor, never across a schema epoch)
        </label>
        <RadioChoice
          legend="Read-back of the uploaded bytes"
          name="update-read-back"
          value={readBack}
          options={[
            { value: 'warn', label: 'warn: record a mismatch and go on' },
            { value: 'enforce', label: 'enforce: refuse on a mismatch' },
          ]}
          onChange={setReadBack}
        />
        <div className="row">
          <button
            type="button"
            className="primary"
            disabled={busy !== null || (offered.length > 0 && picked.length === 0)}
            onClick={() => void run(() => step('Dry run', '/admin/update/apply', body(true), false), 'dry')}
          >
            {busy === 'dry' ? 'Running the checks…' : 'Dry run'}
          </button>
          <ConfirmButton
            label="Apply live…"
            title="Apply the release live?"
            confirmLabel="Apply live"
            action={() => step('Live apply', '/admin/update/apply', body(false), true)}
          >
            <p>
              The engine runs every check again, then uploads the release inert under its data directory and
              reads it back. The deploy token is used up.
            </p>
            {liveBlocked ? (
              <p className="msg msg-warn">
                No deploy token is filled in: the engine will refuse. Get one first.
              </p>
            ) : null}
          </ConfirmButton>
        </div>
        <ErrorBox error={error} />
      </div>

      <details className="update-ramp">
        <summary>Gradual rollout (ramp, engine only)</summary>
        <p className="muted">
          A share of the engine replicas follows the new version; settle the ramp once it proves itself. Never
          for a release that migrates the state store.
        </p>
        <div className="inline-form">
          <Field label="Replicas that follow (%)">
            {(id) => (
              <input
                id={id}
                type="number"
                min={1}
                max={100}
                step={1}
                inputMode="numeric"
                value={percentage}
                onChange={(e) => setPercentage(e.target.value)}
              />
            )}
          </Field>
          <button
            type="button"
            disabled={busy !== null}
            onClick={() =>
              void run(() => step('Ramp dry run', '/admin/update/ramp', rampBody(true), false), 'ramp-dry')
            }
          >
            {busy === 'ramp-dry' ? 'Running the checks…' : 'Dry-run ramp'}
          </button>
          <ConfirmButton
            label="Start ramp…"
            title={`Ramp the engine to ${percentage}% of replicas?`}
            confirmLabel="Start ramp"
            action={() => step('Ramp', '/admin/update/ramp', rampBody(false), true)}
          >
            <p>The deploy token is used up.</p>
            {liveBlocked ? (
              <p className="msg msg-warn">
                No deploy token is filled in: the engine will refuse. Get one first.
              </p>
            ) : null}
          </ConfirmButton>
        </div>
      </details>

      {reply ? <LifecycleResult title={reply.title} reply={reply.reply} /> : null}
    </section>
  );
}
