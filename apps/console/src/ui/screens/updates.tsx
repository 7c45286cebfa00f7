/**
 * Updates (docs/updates.md "Engine routes", docs/console.md "Updates"): what runs, what the signed
 * channel offers and the guards' verdict per component, a dry run showing the lifecycle steps
 * passed and where it stopped, the one-shot deploy token and a live apply (or ramp) that sends it,
 * the update-approval policy with the updates it holds for a second owner, the current update
 * record with settle, rollback (all or per component) and ramp settle, and the canary flights.
 * Reads are for anyone signed in (the record and the policy for `job.read`); every lifecycle write
 * is for `keys.ceremony` (owners), the policy for the owner role (the engine's gate), and each
 * needs step-up, which the API client asks for in place. A reply `restarting` (the engine
 * restarts into the new version) is followed by polling the status until the engine answers again.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { api } from '../api/client.ts';
import { can, isOwner, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ApplyPanel } from './updates/apply.tsx';
import { CanaryPanel } from './updates/canary.tsx';
import { ChannelOffer, RunningFacts } from './updates/channel.tsx';
import { PolicyPanel } from './updates/policy.tsx';
import { RecordPanel } from './updates/record.tsx';
import { waitForEngine } from './updates/steps.ts';
import {
  type LifecycleReply,
  UPDATE_STATUS_KEY,
  UPDATES_KEY,
  type UpdateStatus,
  type UpdatesView,
} from './updates/types.ts';
import './updates/updates.css';

type Restart =
  | { state: 'waiting'; version: string | undefined }
  | { state: 'back'; version: string | null }
  | { state: 'lost' };

export function Updates() {
  const who = useSignedIn();
  const mayWrite = can(who, 'keys.ceremony');
  const mayReadStatus = can(who, 'job.read');
  const client = useQueryClient();
  const view = useQuery({
    queryKey: UPDATES_KEY,
    queryFn: () => api.get<UpdatesView>('/admin/updates'),
    // Every check fetches the channel: no refetch on focus.
    refetchOnWindowFocus: false,
  });
  const status = useQuery({
    queryKey: UPDATE_STATUS_KEY,
    queryFn: () => api.get<UpdateStatus>('/admin/update/status'),
    enabled: mayReadStatus,
    refetchOnWindowFocus: false,
  });
  const [token, setToken] = useState('');
  const [restart, setRestart] = useState<Restart | null>(null);
  const [queued, setQueued] = useState<string | null>(null);
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);

  /** The channel view, the status and the canary (their keys all start with UPDATES_KEY). */
  const refresh = () => client.invalidateQueries({ queryKey: UPDATES_KEY });

  const onReply = async (r: LifecycleReply) => {
    setQueued(
      r.outcome === 'queued'
        ? `The update is queued for a second owner${r.id ? ` (owner action ${r.id})` : ''}: it runs once approved.`
        : null,
    );
    if (r.outcome !== 'restarting') {
      abort.current?.abort();
      setRestart(null);
    }
    if (r.outcome === 'restarting') {
      const version = r.version ?? r.record?.to.engine;
      setRestart({ state: 'waiting', version });
      abort.current?.abort();
      const ctl = new AbortController();
      abort.current = ctl;
      void waitForEngine(ctl.signal, version).then(async (running) => {
        if (ctl.signal.aborted) return;
        setRestart(running === null ? { state: 'lost' } : { state: 'back', version: running });
        await refresh();
      });
      return;
    }
    // A step changes the record, and a settle the floors the channel view's verdicts depend on.
    await refresh();
  };

  const data = view.data;
  return (
    <Page
      title="Updates"
      actions={
        <button
          type="button"
          disabled={view.isFetching}
          onClick={() => {
            if (restart?.state !== 'waiting') setRestart(null);
            void refresh();
          }}
        >
          {view.isFetching ? 'Checking…' : 'Check the channel'}
        </button>
      }
    >
      <p className="muted screen-intro">
        New engine and console releases come from a signed update channel. The engine checks the signature,
        the anti-rollback floor and its guards before anything moves; a dry run shows how far an update would
        get.
      </p>
      {restart?.state === 'waiting' ? (
        <Notice kind="info">
          The engine is restarting{restart.version ? ` into ${restart.version}` : ''}; waiting for it to
          answer again…
        </Notice>
      ) : null}
      {restart?.state === 'back' ? (
        <Notice kind="ok">
          The engine answers again, running {restart.version ?? 'an unknown version'}.
        </Notice>
      ) : null}
      {restart?.state === 'lost' ? (
        <Notice kind="warn">
          The engine has not answered for three minutes since it began restarting. Check the engine host.
        </Notice>
      ) : null}
      {queued ? <Notice kind="ok">{queued}</Notice> : null}
      {view.isPending ? <Loading what="Checking the update channel" /> : null}
      <ErrorBox error={view.error} onRetry={() => void view.refetch()} />
      <ErrorBox error={status.error} onRetry={() => void status.refetch()} />
      {data ? (
        <>
          <RunningFacts view={data} status={status.data} />
          <ChannelOffer view={data} />
          {mayWrite ? (
            data.configured ? (
              <ApplyPanel
                key={data.channel?.digest ?? 'unverified'}
                view={data}
                status={status.data}
                token={token}
                setToken={setToken}
                onReply={onReply}
              />
            ) : null
          ) : (
            <p className="muted">
              Only an owner (the keys.ceremony capability) applies, settles or rolls back updates.
            </p>
          )}
        </>
      ) : null}
      {mayReadStatus ? <PolicyPanel who={who} mayChange={isOwner(who)} /> : null}
      {status.data ? (
        <RecordPanel
          record={status.data.record ?? null}
          mayWrite={mayWrite}
          token={token}
          setToken={setToken}
          onReply={onReply}
        />
      ) : null}
      <CanaryPanel />
    </Page>
  );
}
