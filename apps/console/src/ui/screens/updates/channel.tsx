/**
 * What runs and what the channel offers (`GET /admin/updates`, with `GET /admin/update/status` for
 * the deployer): running versions, floors and schema epoch; the channel document (sequence, dates,
 * digest); the recommended release with its risk, migration flag and required steps; and per
 * component the running, available and floor versions with the guards' verdict for a one-click
 * apply. A channel that fails verification is shown with its code in plain words.
 */
import { formatTime } from '../../components/ui.tsx';
import { TableRegion, Tag } from '../admin/common.tsx';
import { codeText, type UpdateStatus, type UpdatesView, versionText } from './types.ts';

const VERDICT_TEXT = {
  update: 'update available',
  current: 'up to date',
  refused: 'refused',
} as const;

const PROMOTE_TEXT: Record<string, string> = {
  unavailable: 'not in this engine version: a live apply stops after the inert upload',
  restart: 'the engine switches to the new release and restarts into it',
  orchestrator: 'the orchestrator runs the new image; the engine settles it when it starts',
};

export function RunningFacts({ view, status }: { view: UpdatesView; status: UpdateStatus | undefined }) {
  return (
    <section aria-labelledby="update-running">
      <h2 id="update-running">What runs</h2>
      <dl className="facts">
        <dt>Engine</dt>
        <dd data-testid="running-engine">{view.running.engine}</dd>
        <dt>Console release</dt>
        <dd>
          {view.running.console ?? (
            <span className="muted">none installed (the console shipped with the engine)</span>
          )}
        </dd>
        <dt>State schema epoch</dt>
        <dd>{view.schemaEpoch}</dd>
        <dt>Anti-rollback floor</dt>
        <dd>
          {Object.keys(view.floors).length === 0 ? (
            <span className="muted">none yet (set when an update settles)</span>
          ) : (
            Object.entries(view.floors)
              .map(([c, v]) => `${c} ${v}`)
              .join(', ')
          )}
        </dd>
        {status ? (
          <>
            <dt>Deployer</dt>
            <dd>
              {status.deployer === null
                ? 'none'
                : status.deployer === 'container'
                  ? 'container (the orchestrator swaps the image)'
                  : 'directory (releases under the data directory)'}
              {status.configured && !status.destinationConfigured ? ' — no destination for a live apply' : ''}
            </dd>
            {status.promote ? (
              <>
                <dt>Promote</dt>
                <dd>{PROMOTE_TEXT[status.promote] ?? status.promote}</dd>
              </>
            ) : null}
          </>
        ) : null}
        <dt>Last accepted channel</dt>
        <dd>
          {view.lastAccepted ? (
            <>
              sequence {view.lastAccepted.sequence}, {formatTime(view.lastAccepted.acceptedAt)}
            </>
          ) : (
            <span className="muted">none yet</span>
          )}
        </dd>
      </dl>
    </section>
  );
}

export function ChannelOffer({ view }: { view: UpdatesView }) {
  if (!view.configured)
    return (
      <section aria-labelledby="update-channel">
        <h2 id="update-channel">What the channel offers</h2>
        <p className="muted">
          No update channel is configured on this engine (<code>ENGINE_UPDATE_CHANNEL</code>); it checks
          nothing and refuses every update.
        </p>
      </section>
    );
  if (!view.verified)
    return (
      <section aria-labelledby="update-channel">
        <h2 id="update-channel">What the channel offers</h2>
        <div className="msg msg-error" role="alert" data-code={view.code}>
          The channel did not verify: {codeText(view.code)}
          {view.code ? (
            <>
              {' '}
              (<code>{view.code}</code>)
            </>
          ) : null}
          . Nothing it offers is used until it verifies.
          {view.error ? <div className="muted update-break">Engine: {view.error}</div> : null}
        </div>
      </section>
    );
  const r = view.recommended!;
  const ch = view.channel!;
  return (
    <section aria-labelledby="update-channel">
      <h2 id="update-channel">What the channel offers</h2>
      {view.updateAvailable ? (
        <p className="msg msg-info" role="status">
          Engine {r.version} is available (running {view.running.engine}).
        </p>
      ) : (
        <p className="msg msg-ok" role="status">
          No newer engine on the channel.
        </p>
      )}
      <dl className="facts">
        <dt>Recommended release</dt>
        <dd data-testid="recommended-version">{r.version}</dd>
        <dt>Risk</dt>
        <dd>
          <Tag kind={r.risk === 'routine' ? 'ok' : r.risk === 'security' ? 'pending' : 'refused'}>
            {r.risk}
          </Tag>
        </dd>
        <dt>Migrates the state store</dt>
        <dd>
          {r.migration ? 'yes: one-click apply and ramp are refused (a second owner must approve)' : 'no'}
        </dd>
        <dt>Schema epoch</dt>
        <dd>{r.schemaEpoch}</dd>
        <dt>Minimum engine to update from</dt>
        <dd>
          {r.minEngineVersion ?? 'any'}
          {view.compatible === false ? ' — the running engine is older: incompatible' : ''}
        </dd>
        <dt>Required steps</dt>
        <dd>
          {r.requiredSteps.length === 0 ? (
            <span className="muted">none</span>
          ) : (
            <ol className="update-required">
              {r.requiredSteps.map((s, i) => (
                // biome-ignore lint/suspicious/noArrayIndexKey: steps are ordered texts that may repeat
                <li key={i}>{s}</li>
              ))}
            </ol>
          )}
        </dd>
        <dt>Channel</dt>
        <dd>
          {ch.name}, sequence {ch.sequence}, issued {formatTime(ch.issuedAt)}, expires{' '}
          {formatTime(ch.expiresAt)}
        </dd>
        <dt>Document digest</dt>
        <dd className="mono">{ch.digest}</dd>
      </dl>
      <TableRegion label="Components">
        <table className="update-table">
          <caption className="visually-hidden">
            Per component: running and available versions, the guards' verdict
          </caption>
          <thead>
            <tr>
              <th scope="col">Component</th>
              <th scope="col">Running</th>
              <th scope="col">Available</th>
              <th scope="col">Floor</th>
              <th scope="col">Verdict</th>
            </tr>
          </thead>
          <tbody>
            {(view.components ?? []).map((c) => (
              <tr key={c.component} data-component={c.component}>
                <th scope="row">{c.component}</th>
                <td>{versionText(c.running)}</td>
                <td>{c.available}</td>
                <td>{versionText(c.floor)}</td>
                <td>
                  <Tag kind={c.verdict === 'update' ? 'pending' : c.verdict === 'current' ? 'ok' : 'refused'}>
                    {VERDICT_TEXT[c.verdict]}
                  </Tag>
                  {c.code ? (
                    <>
                      : {codeText(c.code)} (<code>{c.code}</code>)
                    </>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableRegion>
    </section>
  );
}
