/**
 * The set-up acknowledgement (docs/posture.md "Set-up acknowledgement"): an owner
 * (`keys.ceremony`) states the key set-up is done, accepted by the engine only while the signer,
 * operational and break-glass keys are all present. The button appears only to owners and only
 * while the keys are present; a 409 (a key went missing meanwhile) names the missing keys in words.
 * Step-up, if the engine ever asks, is handled in place by the API client.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { ApiError, api } from '../../api/client.ts';
import { can, useSignedIn } from '../../auth/session.tsx';
import { ErrorBox, formatTime, Loading, Notice, useRunner } from '../../components/ui.tsx';
import { missingInWords, POSTURE_KEY, SETUP_STATE_KEY, type SetupAcknowledgementState } from './types.ts';

function Refused({ error }: { error: unknown }) {
  if (error instanceof ApiError && error.status === 409) {
    const missing = (error.body as { missing?: unknown } | undefined)?.missing;
    const list = Array.isArray(missing) ? missing.filter((m): m is string => typeof m === 'string') : [];
    return (
      <div className="msg msg-error" role="alert">
        The engine did not accept the acknowledgement: not every key is present. Missing:{' '}
        {missingInWords(list)}.
      </div>
    );
  }
  return <ErrorBox error={error} />;
}

export function AcknowledgePanel() {
  const who = useSignedIn();
  const client = useQueryClient();
  const mayAck = can(who, 'keys.ceremony');
  const q = useQuery({
    queryKey: SETUP_STATE_KEY,
    queryFn: () => api.get<SetupAcknowledgementState>('/admin/setup-state'),
  });
  const { busy, error, run } = useRunner();
  const s = q.data;
  const acknowledge = () =>
    run(async () => {
      await api.post('/admin/setup/acknowledge', {});
      await Promise.all([
        client.invalidateQueries({ queryKey: SETUP_STATE_KEY }),
        client.invalidateQueries({ queryKey: POSTURE_KEY }),
        client.invalidateQueries({ queryKey: ['status'] }),
      ]);
    });
  return (
    <section className="panel" aria-labelledby="ack-title">
      <h2 id="ack-title">Set-up acknowledgement</h2>
      {q.isPending ? <Loading /> : null}
      <ErrorBox error={q.error} onRetry={() => void q.refetch()} />
      {s ? (
        s.acknowledged && s.acknowledgement ? (
          <Notice kind={s.acknowledgement.current ? 'ok' : 'warn'}>
            Set-up acknowledged on {formatTime(s.acknowledgement.at)}.
            {s.acknowledgement.current
              ? ' The keys in force are the ones acknowledged.'
              : ' A key changed since: check the fingerprints on the Set-up screen.'}
          </Notice>
        ) : (
          <>
            <p>
              An owner acknowledges the key set-up once the signer, operational and break-glass keys are all
              in place, so the set-up checklist stops asking.
            </p>
            {!s.keysReady ? (
              <p className="posture-note">Not yet possible: missing {missingInWords(s.missing)}.</p>
            ) : mayAck ? (
              <button
                type="button"
                className="primary"
                disabled={busy !== null}
                onClick={() => void acknowledge()}
              >
                Acknowledge set-up
              </button>
            ) : (
              <p className="muted">Only an owner acknowledges the set-up.</p>
            )}
            <Refused error={error} />
          </>
        )
      ) : null}
    </section>
  );
}
