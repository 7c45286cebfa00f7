/**
 * Configuration history (docs/config-control.md "History"): every applied configuration version
 * (a job upsert or delete, an approved pending change, a policy change, a control-plane restore)
 * appends one version record to a hash-chained, signed log in the settings store.
 *
 * Storage: `config.version.<id zero-padded to 12>` holds `{ record, config, signature, signer }`;
 * `config.history-head` holds `{ id, hash }` of the newest record (a hint: the records are the
 * truth). `record.hash` is `sha384:<hex>` over the RFC 8785 canonical JSON of the record without
 * `hash`; `record.prevHash` is the previous record's hash (GENESIS for id 1); `record.configHash`
 * is the SHA-384 of the canonical JSON of the configuration body kept next to it (a job's stored
 * configuration, `null` for a delete, the policy object for a policy change). The signature is the
 * engine signer's hybrid signature over the canonical record with its hash (context
 * SIGN_CONTEXT), so a record edited and re-hashed still fails, and one re-signed by another key
 * fails against the engine's own public key.
 *
 * Appends are serialised in the process and claimed with `setIfAbsent` on the record's key, so two
 * replicas never write the same id (the loser re-reads the head and retries). The chain check
 * reports the first break (a missing id, a wrong hash, a wrong link, a bad signature, a config
 * body that does not match) and never hides it.
 *
 * Security-relevant behaviour: records carry changed field NAMES only; a job configuration holds
 * no secret (sources name connections of ENGINE_CONNECTIONS_FILE, never a URL or credential), so
 * keeping it whole is safe; nothing else is stored.
 */
import {
  canonicalJsonBytes,
  fingerprint,
  fromBase64Url,
  sha384Digest,
  sign,
  toBase64Url,
  verify,
} from '@coffer/crypto';
import type { State } from '@coffer/state';

export const VERSION_PREFIX = 'config.version.';
export const HISTORY_HEAD = 'config.history-head';
export const SIGN_CONTEXT = 'coffer/config-version/v1';
export const GENESIS_HASH = `sha384:${'0'.repeat(96)}`;

/** What a version records (kinds are a closed list, docs/config-control.md). */
export type VersionKind =
  | 'job-upsert'
  | 'job-delete'
  | 'config-approval-policy'
  | 'retention-prune-approval-policy'
  | 'control-plane-restore'
  | 'control-plane-import';

export interface VersionActor {
  subject: string | null;
  email: string | null;
  /** `passkey`/`oidc`/... session kind, `perimeter-access`, `admin-token` or `engine`. */
  method: string;
}

export interface VersionRecord {
  v: 1;
  id: number;
  at: string;
  kind: VersionKind;
  target: string | null;
  actor: VersionActor;
  approver: { subject: string | null; email: string | null } | null;
  /** The pending change this version carried out, or null for a direct write. */
  changeId: string | null;
  configRev: number | null;
  configHash: string;
  changedFields: string[];
  prevHash: string;
  hash: string;
}

export interface StoredVersion {
  record: VersionRecord;
  config: unknown;
  signature: string;
  signer: string;
}

export interface SignerKeys {
  secretKey: Uint8Array;
  publicKey: Uint8Array;
}

export interface VersionInput {
  kind: VersionKind;
  target: string | null;
  actor: VersionActor;
  approver?: { subject: string | null; email: string | null } | null;
  changeId?: string | null;
  configRev: number | null;
  changedFields: string[];
  /** The configuration this version holds (a job's stored config, null for a delete, a policy). */
  config: unknown;
  at?: string;
}

export const versionKey = (id: number) => `${VERSION_PREFIX}${String(id).padStart(12, '0')}`;

const hashOf = (record: Omit<VersionRecord, 'hash'>) => sha384Digest(canonicalJsonBytes(record)) as string;
export const configHashOf = (config: unknown) => sha384Digest(canonicalJsonBytes(config ?? null)) as string;

let tail: Promise<unknown> = Promise.resolve();

/** The newest record's id and hash (0 and GENESIS when empty), following records past a stale head. */
async function findHead(state: State): Promise<{ id: number; hash: string }> {
  const hint = await state.settings.get<{ id?: unknown; hash?: unknown }>(HISTORY_HEAD);
  let id = typeof hint?.id === 'number' && Number.isSafeInteger(hint.id) && hint.id > 0 ? hint.id : 0;
  let hash = id > 0 && typeof hint?.hash === 'string' ? hint.hash : GENESIS_HASH;
  if (id > 0) {
    const at = await state.settings.get<StoredVersion>(versionKey(id));
    if (at?.record?.hash) hash = at.record.hash;
  }
  for (;;) {
    const next = await state.settings.get<StoredVersion>(versionKey(id + 1));
    if (next === undefined) return { id, hash };
    id += 1;
    hash = next.record?.hash ?? hash;
  }
}

/**
 * Appends one signed version record and returns it. Callable by any room that applies
 * configuration (the jobs routes, the pending-change apply step, the control-plane restore).
 * Throws when the store cannot be written (the caller decides; the configuration write already
 * happened, so routes log and go on).
 */
export function recordConfigVersion(
  deps: { state: State; signer: SignerKeys },
  input: VersionInput,
): Promise<VersionRecord> {
  const run = async (): Promise<VersionRecord> => {
    for (let attempt = 0; attempt < 50; attempt++) {
      const head = await findHead(deps.state);
      const body: Omit<VersionRecord, 'hash'> = {
        v: 1,
        id: head.id + 1,
        at: input.at ?? new Date().toISOString(),
        kind: input.kind,
        target: input.target,
        actor: { subject: input.actor.subject, email: input.actor.email, method: input.actor.method },
        approver: input.approver ?? null,
        changeId: input.changeId ?? null,
        configRev: input.configRev,
        configHash: configHashOf(input.config),
        changedFields: [...input.changedFields],
        prevHash: head.hash,
      };
      const record: VersionRecord = { ...body, hash: hashOf(body) };
      const signature = toBase64Url(sign(deps.signer.secretKey, canonicalJsonBytes(record), SIGN_CONTEXT));
      const stored: StoredVersion = {
        record,
        config: input.config ?? null,
        signature,
        signer: fingerprint(deps.signer.publicKey),
      };
      if (await deps.state.settings.setIfAbsent(versionKey(record.id), stored)) {
        await deps.state.settings.set(HISTORY_HEAD, { id: record.id, hash: record.hash });
        return record;
      }
    }
    throw new Error('config history: could not claim a version id');
  };
  const p = tail.then(run, run);
  tail = p.catch(() => undefined);
  return p;
}

export type BreakReason =
  | 'missing'
  | 'unreadable'
  | 'hash-mismatch'
  | 'prev-mismatch'
  | 'signature-invalid'
  | 'config-mismatch'
  | 'head-mismatch';

export interface ChainCheck {
  ok: boolean;
  /** Records checked. */
  checked: number;
  head: { id: number; hash: string } | null;
  brokenAt?: number;
  reason?: BreakReason;
}

/** The signature check of one stored version against the engine's signer public key. */
export function signatureValid(v: StoredVersion, publicKey: Uint8Array): boolean {
  try {
    return verify(publicKey, canonicalJsonBytes(v.record), fromBase64Url(v.signature), SIGN_CONTEXT);
  } catch {
    return false;
  }
}

/** What is wrong with one stored version on its own, or null. */
export function recordFault(v: unknown, id: number, publicKey: Uint8Array): BreakReason | null {
  const s = v as StoredVersion | undefined;
  if (s === undefined || s === null) return 'missing';
  if (typeof s !== 'object' || typeof s.record !== 'object' || s.record === null) return 'unreadable';
  if (s.record.id !== id || typeof s.signature !== 'string') return 'unreadable';
  const { hash, ...body } = s.record;
  let computed: string;
  try {
    computed = hashOf(body);
  } catch {
    return 'unreadable';
  }
  if (computed !== hash) return 'hash-mismatch';
  if (!signatureValid(s, publicKey)) return 'signature-invalid';
  if (configHashOf(s.config) !== s.record.configHash) return 'config-mismatch';
  return null;
}

/** Every stored version, ordered by id (entries whose key is not a version id are skipped). */
export async function listVersions(state: State): Promise<Map<number, unknown>> {
  const out = new Map<number, unknown>();
  for (const { key, value } of await state.settings.list(VERSION_PREFIX)) {
    const n = Number(key.slice(VERSION_PREFIX.length));
    if (Number.isSafeInteger(n) && n > 0) out.set(n, value);
  }
  return out;
}

/**
 * Re-computes the whole chain: ids 1..N contiguous, each record's hash, signature and config
 * body, each link to the previous hash, and the head hint. The first break is reported.
 */
export async function checkChain(
  state: State,
  publicKey: Uint8Array,
  versions?: Map<number, unknown>,
): Promise<ChainCheck> {
  const all = versions ?? (await listVersions(state));
  const max = Math.max(0, ...all.keys());
  const hint = await state.settings.get<{ id?: unknown; hash?: unknown }>(HISTORY_HEAD);
  const hintId = typeof hint?.id === 'number' ? hint.id : 0;
  const last = Math.max(max, hintId);
  let prev = GENESIS_HASH;
  let checked = 0;
  for (let id = 1; id <= last; id++) {
    const v = all.get(id);
    const fault = recordFault(v, id, publicKey);
    const head = checked > 0 ? { id: id - 1, hash: prev } : null;
    if (fault) return { ok: false, checked, head, brokenAt: id, reason: fault };
    const rec = (v as StoredVersion).record;
    if (rec.prevHash !== prev) return { ok: false, checked, head, brokenAt: id, reason: 'prev-mismatch' };
    prev = rec.hash;
    checked++;
  }
  const head = last > 0 ? { id: last, hash: prev } : null;
  if (hintId === last && last > 0 && hint?.hash !== prev)
    return { ok: false, checked, head, brokenAt: last, reason: 'head-mismatch' };
  return { ok: true, checked, head };
}
