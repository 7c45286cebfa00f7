/**
 * The cheap reads of the Posture screen: `GET /admin/status` highlights (presence only, never a
 * value) and the licence card (`GET /admin/licence`). A licence is a report, never a gate.
 */
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox, formatTime, Loading } from '../../components/ui.tsx';
import { LICENCE_KEY, type Licence, POSTURE_STATUS_KEY, type PostureStatus } from './types.ts';

function yesNo(v: boolean | null | undefined, yes = 'yes', no = 'no'): string {
  if (v === null || v === undefined) return 'unknown';
  return v ? yes : no;
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <div className="posture-fact">
      <dt>{term}</dt>
      <dd>{children}</dd>
    </div>
  );
}

export function StatusPanel() {
  const q = useQuery({
    queryKey: POSTURE_STATUS_KEY,
    queryFn: () => api.get<PostureStatus>('/admin/status'),
  });
  const s = q.data;
  return (
    <section className="panel" aria-labelledby="status-title">
      <h2 id="status-title">Engine status</h2>
      {q.isPending ? <Loading /> : null}
      <ErrorBox error={q.error} onRetry={() => void q.refetch()} />
      {s ? (
        <dl className="facts posture-facts">
          <Fact term="Ready to seal runs">
            {s.ready ? 'yes' : `no: ${s.missing.join(', ') || 'keys missing'}`}
          </Fact>
          <Fact term="Keys present">
            signer {yesNo(s.keys.signer)}, operational {yesNo(s.keys.operational)}, break-glass{' '}
            {yesNo(s.keys.breakGlass)}, vendor support {yesNo(s.keys.support)}
          </Fact>
          <Fact term="Set-up acknowledged">
            {s.setupAcknowledged
              ? s.setupAcknowledgementCurrent === false
                ? 'yes, but a key changed since'
                : 'yes'
              : 'no'}
          </Fact>
          <Fact term="Admin token path">
            {s.tokenPathClosed ? 'closed' : s.adminTokenPresent ? 'open (token set)' : 'open'}
          </Fact>
          <Fact term="Access perimeter">
            {yesNo(s.perimeterAccessConfigured, 'configured', 'not configured')}
          </Fact>
          <Fact term="Console origin (passkeys)">
            {yesNo(s.consoleOriginConfigured, 'configured', 'not configured')}
          </Fact>
          <Fact term="TLS ended by the engine">{yesNo(s.tlsTerminatedByEngine)}</Fact>
          <Fact term="State store">{s.database ?? 'unknown'}</Fact>
          <Fact term="Destinations">{s.destinations ? s.destinations.join(', ') || 'none' : 'unknown'}</Fact>
          <Fact term="Restore roots">{yesNo(s.restoreRootsConfigured, 'configured', 'none')}</Fact>
          <Fact term="Mail (SMTP)">
            {s.smtpConfigured
              ? `configured${s.smtpCredentialsPresent ? ', with credentials' : ', without credentials'}`
              : 'not configured'}
          </Fact>
          <Fact term="Update channel">
            {yesNo(s.updateChannelConfigured, 'configured', 'not configured')}
          </Fact>
          <Fact term="Identity providers">
            {s.identityProviders
              ? `${s.identityProviders.enabled} enabled of ${s.identityProviders.connections}`
              : 'unknown'}
          </Fact>
          <Fact term="Canary">
            {s.canary
              ? `${s.canary.verdict ?? 'no verdict'}, last flight ${formatTime(s.canary.lastFlightAt)}`
              : 'no flight yet'}
          </Fact>
          <Fact term="Scheduler">
            {s.scheduler ? `last tick ${formatTime(s.scheduler.lastTick)}` : 'unknown'}
          </Fact>
          <Fact term="Jobs">{s.counts?.jobs ?? 'unknown'}</Fact>
        </dl>
      ) : null}
    </section>
  );
}

const LICENCE_WORDS: Record<Licence['status'], string> = {
  valid: 'Valid',
  absent: 'No licence',
  'not-yet-valid': 'Not yet valid',
  lapsed: 'Lapsed',
  invalid: 'Invalid (not verified)',
};

export function LicencePanel() {
  const q = useQuery({ queryKey: LICENCE_KEY, queryFn: () => api.get<Licence>('/admin/licence') });
  const l = q.data;
  return (
    <section className="panel" aria-labelledby="licence-title">
      <h2 id="licence-title">Licence</h2>
      {q.isPending ? <Loading /> : null}
      <ErrorBox error={q.error} onRetry={() => void q.refetch()} />
      {l ? (
        <>
          <dl className="facts posture-facts">
            <Fact term="Status">
              <span data-licence-status={l.status}>{LICENCE_WORDS[l.status] ?? l.status}</span>
              {l.reason ? <span className="muted"> ({l.reason})</span> : null}
            </Fact>
            <Fact term="Tier in effect">{l.tier}</Fact>
            {l.licensee ? <Fact term="Licensee">{l.licensee}</Fact> : null}
            {l.licensedTier && l.licensedTier !== l.tier ? (
              <Fact term="Licensed tier">{l.licensedTier}</Fact>
            ) : null}
            {l.seats ? <Fact term="Seats">{l.seats}</Fact> : null}
            {l.expiresAt ? <Fact term="Expires">{formatTime(l.expiresAt)}</Fact> : null}
          </dl>
          <p className="posture-note">
            An absent, lapsed or invalid licence never stops a backup, a restore or a drill: it changes only
            the tier reported here.
          </p>
        </>
      ) : null}
    </section>
  );
}
