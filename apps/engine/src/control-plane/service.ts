/**
 * `ControlPlaneService`: export, restore into an empty engine, apply the staged slices, import
 * into another engine, and the recovery status (docs/control-plane.md). Routes
 * (routes/admin/control-plane.ts) only map HTTP onto it; every refusal comes back as a value
 * `{ ok: false, status, error, path? }` whose sentence never carries a secret or input bytes.
 */
import { readRecoverySigner } from '@coffer/archive';
import { decodeKeyFile, fingerprint, sha384Digest } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import type { State } from '@coffer/state';
import type { EngineConfig } from '../config.ts';
import { readPolicy, recordConfigVersion, type VersionActor } from '../config-changes/index.ts';
import type { EngineKeys } from '../keys.ts';
import {
  applyAuthority,
  applyConfiguration,
  applyResume,
  BIRTH_SETTING,
  type ConfigurationOutcome,
  emptiness,
  STAGED_SETTING,
  type StagedRestore,
} from './apply.ts';
import { buildExport, type ControlPlaneExport, summaryOf } from './document.ts';
import {
  bodyOf,
  crossCheckSealed,
  openSigned,
  type SealedExport,
  type SignedExport,
  sealExport,
  signExport,
} from './envelope.ts';
import { findPlaintextSecret } from './secret-scan.ts';
import { documentProblem } from './validate.ts';

/** The bare admin token as a config-history actor (a restore has no person). */
const ADMIN_TOKEN_ACTOR: VersionActor = { subject: null, email: null, method: 'admin-token' };

export type Refusal = { ok: false; status: 400 | 409; error: string; path?: string };
type Result<T> = ({ ok: true } & T) | Refusal;

export interface ControlPlaneDeps {
  state: State;
  keys: EngineKeys;
  config: EngineConfig;
  destinations: ReadonlyMap<string, ObjectStore>;
}

/** Why recovery is needed (docs/control-plane.md "Status"). */
export type RecoveryReason = 'restore-staged' | 'keys-predate-state' | 'archives-in-destination';

export interface ControlPlaneStatus {
  recoveryNeeded: boolean;
  reasons: RecoveryReason[];
  empty: boolean;
  counts: { jobs: number; members: number; channels: number };
  signerFingerprint: string;
  breakGlassKey: boolean;
  staged: null | {
    stagedAt: string;
    sealed: boolean;
    signerFingerprint: string;
    jobs: number;
    members: number;
  };
}

export class ControlPlaneService {
  private readonly d: ControlPlaneDeps;

  constructor(deps: ControlPlaneDeps) {
    this.d = deps;
  }

  /**
   * One config-history version per job the restore or import wrote (docs/config-control.md
   * "History"), so the chain shows where a job's configuration came from. A history write that
   * fails is logged by the caller's logger and never undoes the restore.
   */
  private async recordVersions(
    configuration: ConfigurationOutcome,
    kind: 'control-plane-restore' | 'control-plane-import',
    actor: VersionActor,
  ): Promise<number> {
    let failed = 0;
    for (const job of configuration.jobs) {
      if (job.outcome === 'exists') continue;
      const stored = await this.d.state.jobs.get(job.id);
      if (!stored) continue;
      try {
        await recordConfigVersion(
          { state: this.d.state, signer: this.d.keys.signer },
          {
            kind,
            target: job.id,
            actor,
            configRev: stored.configRev,
            changedFields: Object.keys(stored.config).sort(),
            config: stored.config,
          },
        );
      } catch {
        failed++;
      }
    }
    return failed;
  }

  /** The engine's own secret values, compared by the secret scan (never returned). */
  private knownSecrets(): string[] {
    const c = this.d.config;
    return [c.adminToken, c.scimBearerToken, c.mail?.password].filter(
      (s): s is string => typeof s === 'string',
    );
  }

  /**
   * Records, once per state store, whether this engine's signer key was created together with
   * it: an empty store opened with older keys is a sign that the state was lost.
   */
  async recordBirth(): Promise<void> {
    await this.d.state.settings.setIfAbsent(BIRTH_SETTING, {
      at: new Date().toISOString(),
      signerFingerprint: this.d.keys.signer.fingerprint,
      keysCreatedWithState: this.d.keys.signer.created,
    });
  }

  // ------------------------------------------------------------------------------------------
  // Export

  async buildSigned(): Promise<Result<{ signed: SignedExport; doc: ControlPlaneExport }>> {
    const doc = await buildExport({
      state: this.d.state,
      connections: this.d.config.connections,
      signerFingerprint: this.d.keys.signer.fingerprint,
    });
    const secret = findPlaintextSecret(doc, this.knownSecrets());
    if (secret)
      return {
        ok: false,
        status: 409,
        error: `the export would carry a plaintext secret (${secret.rule}); nothing was exported`,
        path: secret.path,
      };
    return { ok: true, signed: signExport(doc, this.d.keys.signer.secretKey), doc };
  }

  async buildSealed(): Promise<Result<{ sealed: SealedExport; doc: ControlPlaneExport }>> {
    const bg = this.d.keys.breakGlass;
    if (!bg) return { ok: false, status: 409, error: 'no break-glass public key is configured to seal to' };
    const built = await this.buildSigned();
    if (!built.ok) return built;
    const sealed = await sealExport(built.signed, {
      signerSecretKey: this.d.keys.signer.secretKey,
      signerPublicKey: this.d.keys.signer.publicKey,
      breakGlassPublicKey: bg.publicKey,
    });
    return { ok: true, sealed, doc: built.doc };
  }

  // ------------------------------------------------------------------------------------------
  // Status

  private async archivesOfThisSigner(): Promise<boolean> {
    for (const store of this.d.destinations.values()) {
      try {
        const signer = await readRecoverySigner(store);
        if (signer === null || fingerprint(signer) !== this.d.keys.signer.fingerprint) continue;
        if ((await store.list('jobs/', { limit: 1 })).objects.length > 0) return true;
      } catch {
        // An unreachable destination proves nothing either way.
      }
    }
    return false;
  }

  async status(): Promise<ControlPlaneStatus> {
    const { state } = this.d;
    const e = await emptiness(state);
    const staged = await state.settings.get<StagedRestore>(STAGED_SETTING);
    const reasons: RecoveryReason[] = [];
    let stagedView: ControlPlaneStatus['staged'] = null;
    if (staged) {
      reasons.push('restore-staged');
      let jobs = 0;
      let members = 0;
      try {
        const doc = JSON.parse(staged.export) as ControlPlaneExport;
        jobs = doc.slices.resume.jobs.length;
        members = doc.slices.authority.members.length;
      } catch {
        // Counted as zero; apply-staged re-verifies and refuses it.
      }
      stagedView = {
        stagedAt: staged.stagedAt,
        sealed: staged.sealed,
        signerFingerprint: staged.signerFingerprint,
        jobs,
        members,
      };
    }
    if (e.empty) {
      const birth = await state.settings.get<{ keysCreatedWithState?: boolean }>(BIRTH_SETTING);
      if (birth && birth.keysCreatedWithState === false) reasons.push('keys-predate-state');
      if (await this.archivesOfThisSigner()) reasons.push('archives-in-destination');
    }
    return {
      recoveryNeeded: reasons.length > 0,
      reasons,
      empty: e.empty,
      counts: { jobs: e.jobs, members: e.members, channels: e.channels },
      signerFingerprint: this.d.keys.signer.fingerprint,
      breakGlassKey: this.d.keys.breakGlass !== null,
      staged: stagedView,
    };
  }

  // ------------------------------------------------------------------------------------------
  // Restore (bare admin token; the routes check the caller)

  private verifyOwn(signed: { export: string; signature: string }): Result<{ doc: ControlPlaneExport }> {
    const opened = openSigned(signed, this.d.keys.signer.publicKey);
    if (!opened.ok) return { ok: false, status: 400, error: opened.error };
    const problem = documentProblem(opened.value, this.knownSecrets());
    if (problem) return { ok: false, status: 400, error: problem.error, path: problem.path };
    return { ok: true, doc: opened.value };
  }

  async restore(
    signed: { export: string; signature: string },
    sealed: boolean,
  ): Promise<
    Result<{
      doc: ControlPlaneExport;
      configuration: ConfigurationOutcome;
      runs: number;
      historyFailures: number;
    }>
  > {
    const checked = this.verifyOwn(signed);
    if (!checked.ok) return checked;
    const { state } = this.d;
    if (await state.settings.get(STAGED_SETTING))
      return { ok: false, status: 409, error: 'a restore is already staged; apply it first' };
    const e = await emptiness(state);
    if (!e.empty)
      return {
        ok: false,
        status: 409,
        error: 'the engine is not empty: restore only into an engine with no jobs, members or channels',
      };
    const doc = checked.doc;
    const staged: StagedRestore = {
      stagedAt: new Date().toISOString(),
      sealed,
      signerFingerprint: doc.signerFingerprint,
      bodyHash: sha384Digest(
        bodyOf({
          export: signed.export,
          signature: signed.signature,
          signerFingerprint: doc.signerFingerprint,
        }),
      ),
      export: signed.export,
      signature: signed.signature,
    };
    // Staged first: a crash part-way leaves a stage that status reports and apply-staged completes.
    if (!(await state.settings.setIfAbsent(STAGED_SETTING, staged)))
      return { ok: false, status: 409, error: 'a restore is already staged; apply it first' };
    const resume = await applyResume(state, doc.slices.resume);
    const configuration = await applyConfiguration(state, doc.slices.configuration, {
      mode: 'restore',
      disable: false,
      withNotify: true,
    });
    const historyFailures = await this.recordVersions(
      configuration,
      'control-plane-restore',
      ADMIN_TOKEN_ACTOR,
    );
    return { ok: true, doc, configuration, runs: resume.runs, historyFailures };
  }

  async restoreSealed(
    sealedArtefact: unknown,
    plaintext: unknown,
  ): ReturnType<ControlPlaneService['restore']> {
    const crossed = crossCheckSealed(sealedArtefact, plaintext, this.d.keys.signer.publicKey);
    if (!crossed.ok) return { ok: false, status: 400, error: crossed.error };
    return this.restore(crossed.value, true);
  }

  async applyStaged(): Promise<
    Result<{
      doc: ControlPlaneExport;
      runs: number;
      members: number;
      customRoles: number;
      policies: string[];
    }>
  > {
    const { state } = this.d;
    const staged = await state.settings.get<StagedRestore>(STAGED_SETTING);
    if (!staged) return { ok: false, status: 409, error: 'nothing is staged' };
    const checked = this.verifyOwn(staged);
    if (!checked.ok) return { ...checked, error: `the staged export no longer verifies: ${checked.error}` };
    const doc = checked.doc;
    const resume = await applyResume(state, doc.slices.resume);
    const authority = await applyAuthority(state, doc.slices.authority, doc.slices.configuration.policies);
    await state.settings.delete(STAGED_SETTING);
    return { ok: true, doc, runs: resume.runs, ...authority };
  }

  // ------------------------------------------------------------------------------------------
  // Import (access.policy): another engine's export, verified against an operator-supplied key

  private signerKeyOf(armoured: string): Result<{ publicKey: Uint8Array }> {
    try {
      return { ok: true, publicKey: decodeKeyFile(armoured, 'signer-public').key };
    } catch {
      return {
        ok: false,
        status: 400,
        error: 'signerPublicKey must be an armoured signer public key (.pub)',
      };
    }
  }

  async import(
    signed: { export: string; signature: string },
    signerPublicKey: string,
    sealed = false,
    actor: VersionActor = ADMIN_TOKEN_ACTOR,
  ): Promise<
    Result<{
      doc: ControlPlaneExport;
      sealed: boolean;
      sameSigner: boolean;
      heldByApproval: boolean;
      configuration: ConfigurationOutcome;
      historyFailures: number;
    }>
  > {
    const key = this.signerKeyOf(signerPublicKey);
    if (!key.ok) return key;
    const opened = openSigned(signed, key.publicKey);
    if (!opened.ok) return { ok: false, status: 400, error: opened.error };
    const problem = documentProblem(opened.value, this.knownSecrets());
    if (problem) return { ok: false, status: 400, error: problem.error, path: problem.path };
    const doc = opened.value;
    const sameSigner = doc.signerFingerprint === this.d.keys.signer.fingerprint;
    // Under configuration dual control an import must not become a one-person way to start jobs:
    // every imported job then arrives disabled, and enabling it is a job write a second person
    // approves (docs/control-plane.md "Import").
    const heldByApproval = (await readPolicy(this.d.state, 'config-approval')).enabled;
    const configuration = await applyConfiguration(this.d.state, doc.slices.configuration, {
      mode: 'import',
      disable: !sameSigner || heldByApproval,
      withNotify: sameSigner,
    });
    const historyFailures = await this.recordVersions(configuration, 'control-plane-import', actor);
    return { ok: true, doc, sealed, sameSigner, heldByApproval, configuration, historyFailures };
  }

  async importSealed(
    sealedArtefact: unknown,
    plaintext: unknown,
    signerPublicKey: string,
    actor?: VersionActor,
  ): ReturnType<ControlPlaneService['import']> {
    const key = this.signerKeyOf(signerPublicKey);
    if (!key.ok) return key;
    const crossed = crossCheckSealed(sealedArtefact, plaintext, key.publicKey);
    if (!crossed.ok) return { ok: false, status: 400, error: crossed.error };
    return this.import(crossed.value, signerPublicKey, true, actor);
  }
}

export { summaryOf };
