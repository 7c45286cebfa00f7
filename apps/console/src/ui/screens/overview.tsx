/** The first screen: engine status (presence only) and what set-up still needs. */
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api } from '../api/client.ts';
import { ErrorBox, formatTime, Loading, Notice, Page } from '../components/ui.tsx';

export interface EngineStatus {
  service: string;
  engineVersion: string;
  ready: boolean;
  keysReady: boolean;
  missing: string[];
  keys: { signer: boolean; operational: boolean; breakGlass: boolean; support: boolean };
  adminTokenPresent: boolean;
  tokenPathClosed: boolean;
  consoleOriginConfigured: boolean;
  database: string;
  destinations: string[];
  startedAt: string;
}

export function useStatus() {
  return useQuery({ queryKey: ['status'], queryFn: () => api.get<EngineStatus>('/admin/status') });
}

const yes = (b: boolean) => (b ? 'yes' : 'no');

export function Overview() {
  const status = useStatus();
  return (
    <Page title="Overview">
      {status.isPending ? <Loading /> : null}
      <ErrorBox error={status.error} onRetry={() => void status.refetch()} />
      {status.data ? (
        <>
          {status.data.ready ? (
            <Notice kind="ok">The engine is ready: runs seal and verify.</Notice>
          ) : (
            <Notice kind="warn">
              Runs cannot seal yet: {status.data.missing.join(', ') || 'keys missing'}.{' '}
              <Link href="/setup">Finish set-up</Link>.
            </Notice>
          )}
          <dl className="facts">
            <dt>Engine</dt>
            <dd>
              {status.data.service} {status.data.engineVersion}
            </dd>
            <dt>Started</dt>
            <dd>{formatTime(status.data.startedAt)}</dd>
            <dt>State store</dt>
            <dd>{status.data.database}</dd>
            <dt>Destinations</dt>
            <dd>{status.data.destinations.join(', ') || 'none'}</dd>
            <dt>Break-glass key</dt>
            <dd>{status.data.keys.breakGlass ? 'present' : 'missing'}</dd>
            <dt>Admin token path</dt>
            <dd>{status.data.tokenPathClosed ? 'closed' : 'open'}</dd>
            <dt>Passkeys configured</dt>
            <dd>{yes(status.data.consoleOriginConfigured)}</dd>
          </dl>
        </>
      ) : null}
    </Page>
  );
}
