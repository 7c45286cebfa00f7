/**
 * The posture room (docs/posture.md): whether the installation is safe right now. The preflight's
 * live probes (preflight.ts, smtp.ts), the signed licence (licence.ts) and the set-up
 * acknowledgement (setup.ts). Reports only: nothing here gates a backup, a restore or a drill.
 */
export {
  BUILT_IN_VENDOR_PUBLIC_KEY,
  checkLicence,
  checkLicenceBody,
  FREE_TIER,
  LICENCE_CONTEXT,
  LICENCE_KIND,
  type LicenceBody,
  type LicenceFile,
  type LicenceReport,
  type LicenceStatus,
  signLicence,
  verifyLicence,
} from './licence.ts';
export {
  CANARY_MAX_AGE_MS,
  CLOCK_MAX_SKEW_MS,
  PROBE_PREFIX,
  type PreflightHost,
  type PreflightIdp,
  type PreflightItem,
  type PreflightReport,
  type PreflightStatus,
  runPreflight,
  TICK_MAX_AGE_MS,
} from './preflight.ts';
export {
  acknowledgementCurrent,
  keysMissing,
  readAcknowledgement,
  SETUP_ACK_SETTING,
  type SetupAcknowledgement,
} from './setup.ts';
export { probeSmtp, type SmtpProbeResult } from './smtp.ts';
