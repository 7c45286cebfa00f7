/**
 * The control-plane room (docs/control-plane.md): the export document and its canonical signed
 * and sealed envelopes, the plaintext-secret scan, restore into an empty engine with staging,
 * import into another engine, the recovery status, and the test-only clear.
 */
export { clearControlPlane, emptiness, STAGED_SETTING, type StagedRestore } from './apply.ts';
export { buildExport, type ControlPlaneExport, EXPORT_KIND, summaryOf } from './document.ts';
export {
  bodyOf,
  EXPORT_CONTEXT,
  SEALED_HEADER_CONTEXT,
  SEALED_KIND,
  type SealedExport,
  SIGNED_KIND,
  type SignedExport,
} from './envelope.ts';
export { findPlaintextSecret, type SecretFinding } from './secret-scan.ts';
export {
  ControlPlaneService,
  type ControlPlaneStatus,
  type RecoveryReason,
  type Refusal,
} from './service.ts';
