/**
 * Posture (docs/posture.md, docs/console.md "Posture"): whether the installation is safe right now.
 * The preflight's live probes grouped with their status, evidence and remediation (re-run on
 * request), the engine status highlights (presence only), the licence card (a report, never a
 * gate) and the set-up acknowledgement for owners. For anyone signed in (`posture.read`, every
 * built-in role); the only write, the acknowledgement, is for `keys.ceremony`.
 */
import { Page } from '../components/ui.tsx';
import { AcknowledgePanel } from './posture/acknowledge.tsx';
import { LicencePanel, StatusPanel } from './posture/engine.tsx';
import { PreflightPanel } from './posture/preflight.tsx';
import './posture/posture.css';

export function Posture() {
  return (
    <Page title="Posture">
      <PreflightPanel />
      <AcknowledgePanel />
      <StatusPanel />
      <LicencePanel />
    </Page>
  );
}
