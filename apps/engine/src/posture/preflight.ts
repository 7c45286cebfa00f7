/**
 * The preflight (`GET /admin/preflight`, docs/posture.md "Preflight"): live probes of everything
 * an installation needs to be safe, run concurrently, each under its own timeout.
 *
 * Every item is `{ id, title, status, evidence, remediation }` with status
 *   verified     probed live just now and found working;
 *   configured   set, but nothing the engine can reach proves it works (a pasted SAML metadata,
 *                the break-glass public key whose secret half is offline);
 *   unconfigured optional and not set (SMTP, identity providers, the update channel, restore roots);
 *   failed       required and missing, or probed and not working (also a probe that threw or timed out).
 *
 * Destination probes write, read back and delete one small object under `_canary/preflight/`
 * (through the canary's namespace wrapper, canary/store.ts), which runs, retention, restores,
 * drills and coffer-recover never list (they read under `jobs/` and `_RECOVERY/`).
 *
 * Security-relevant behaviour: evidence holds ids, fingerprints, codes, counts, times and store
 * descriptions (which never carry credentials); a thrown error contributes only a code matching
 * CODE (never its message), so no secret, token or path from an error text reaches the reply.
 */
import { access, constants, stat } from 'node:fs/promises';
import {
  canonicalJsonBytes,
  open as openSealed,
  randomBytes,
  recipientPublicKeyFromSecret,
  seal,
  sign,
  signerPublicKeyFromSecret,
  toHex,
  verify,
} from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import type { State } from '@coffer/state';
import { CanaryHistory } from '../canary/history.ts';
import { canaryStore } from '../canary/store.ts';
import type { EngineConfig } from '../config.ts';
import type { EngineKeys } from '../keys.ts';
import { TICK_SETTING } from '../runs/scheduler.ts';
import { probeSmtp } from './smtp.ts';

export type PreflightStatus = 'verified' | 'configured' | 'unconfigured' | 'failed';

export interface PreflightItem {
  id: string;
  title: string;
  status: PreflightStatus;
  evidence: Record<string, unknown>;
  /** What to do; null when verified. */
  remediation: string | null;
}

export interface PreflightReport {
  ok: boolean;
  checkedAt: string;
  durationMs: number;
  summary: Record<PreflightStatus, number> & { total: number };
  items: PreflightItem[];
}

/** An identity-provider connection as the preflight sees it (from the sso room, wired by the route). */
export interface PreflightIdp {
  id: string;
  kind: 'oidc' | 'saml';
  enabled: boolean;
  /** SAML: where the metadata comes from; OIDC: always `discovery`. */
  source: 'discovery' | 'metadata-url' | 'pasted-metadata';
  test(): Promise<{ ok: true } | { ok: false; reason: string }>;
}

export interface PreflightHost {
  config: EngineConfig;
  keys: EngineKeys;
  state: State;
  destinations: ReadonlyMap<string, ObjectStore>;
  startedAt: Date;
  identityProviders(): Promise<PreflightIdp[]>;
  /** The update service's channel check (called only when a channel is configured). */
  updateChannel(): Promise<{ verified: boolean; code?: string; sequence?: number | null }>;
}

export interface PreflightOptions {
  now?: () => Date;
  /** Per-probe timeout (default 10 s; SMTP uses the smaller of this and 5 s). */
  timeoutMs?: number;
}

/** The prefix (inside `_canary/`) of the destination probe objects. */
export const PROBE_PREFIX = 'preflight/';
/** The scheduler tick is stale after this long (or 2 ticks + 5 minutes when the tick is longer). */
export const TICK_MAX_AGE_MS = 35 * 60_000;
/** The canary is stale after this long (or 2 intervals when the interval is longer). */
export const CANARY_MAX_AGE_MS = 2 * 3600_000;
/** Largest tolerated difference between this clock and an object store's. */
export const CLOCK_MAX_SKEW_MS = 5 * 60_000;
const PROBE_BYTES = 64;
const CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

/** The code of a thrown value (never its message). */
export function codeOf(e: unknown): string {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' && CODE.test(c) ? c : 'error';
}

/** The destination's own error code (an S3 error Code such as NoSuchBucket, an errno), when it is one. */
function storeCodeOf(e: unknown): { storeCode?: string } {
  const c = (e as { storeCode?: unknown } | null)?.storeCode;
  return typeof c === 'string' && CODE.test(c) ? { storeCode: c } : {};
}

class ProbeTimeout extends Error {
  readonly code = 'timeout';
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ProbeTimeout('probe timed out')), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

const item = (
  id: string,
  title: string,
  status: PreflightStatus,
  evidence: Record<string, unknown>,
  remediation: string | null = null,
): PreflightItem => ({
  id,
  title,
  status,
  evidence,
  remediation: status === 'verified' ? null : remediation,
});

interface DestinationOutcome {
  item: PreflightItem;
  /** The store's own time for the probe object (S3 Last-Modified), when independent of this clock. */
  serverTime: Date | null;
  /** This clock right after the write the store stamped. */
  localTime: Date | null;
}

async function probeDestination(
  id: string,
  store: ObjectStore,
  now: () => Date,
): Promise<DestinationOutcome> {
  const title = `Destination ${id} writable and readable`;
  const s3 = store.description.startsWith('s3://');
  const evidence: Record<string, unknown> = {
    destination: id,
    description: store.description,
    kind: s3 ? 's3' : 'fs',
  };
  const ns = canaryStore(store);
  const key = `${PROBE_PREFIX}${now().toISOString().replace(/[:.]/g, '-')}-${toHex(randomBytes(6))}`;
  const bytes = randomBytes(PROBE_BYTES);
  let step = 'write';
  const started = Date.now();
  try {
    await ns.put(key, bytes, {
      contentLength: bytes.length,
      ifNoneMatch: '*',
      contentType: 'application/octet-stream',
    });
    const localTime = now();
    step = 'head';
    const info = await ns.head(key);
    if (info === null || info.size !== bytes.length)
      throw Object.assign(new Error('size'), { code: 'head-mismatch' });
    step = 'read';
    const back = await ns.get(key, undefined, { maxBytes: PROBE_BYTES * 2 });
    step = 'compare';
    if (back.length !== bytes.length || !back.every((b, i) => b === bytes[i]))
      throw Object.assign(new Error('compare'), { code: 'read-back-mismatch' });
    step = 'delete';
    await ns.delete(key);
    step = 'verify-delete';
    if ((await ns.head(key)) !== null) throw Object.assign(new Error('delete'), { code: 'still-present' });
    const serverTime = s3 && info.lastModified ? info.lastModified : null;
    evidence.bytes = PROBE_BYTES;
    evidence.roundTripMs = Date.now() - started;
    evidence.steps = ['write', 'read', 'compare', 'delete'];
    if (serverTime) evidence.serverTime = serverTime.toISOString();
    return { item: item(`destination:${id}`, title, 'verified', evidence), serverTime, localTime };
  } catch (e) {
    // Best effort: a probe that failed after writing does not leave its object behind.
    if (step !== 'write') await ns.delete(key).catch(() => undefined);
    return {
      item: item(
        `destination:${id}`,
        title,
        'failed',
        { ...evidence, step, code: codeOf(e), ...storeCodeOf(e) },
        s3
          ? 'Check that the bucket exists, the credentials the engine runs with may put, get and delete objects under the prefix, and the endpoint is reachable.'
          : 'Check that the directory exists, is on a mounted volume and is writable by the engine user.',
      ),
      serverTime: null,
      localTime: null,
    };
  }
}

function probeSigner(keys: EngineKeys): PreflightItem {
  const title = 'Signer key present and usable';
  const fix =
    'The signer key file is damaged: restore it from your key backup (ENGINE_SIGNER_KEY_FILE or <data dir>/keys/).';
  try {
    const msg = canonicalJsonBytes({ preflight: 'keys', nonce: toHex(randomBytes(8)) });
    const pub = signerPublicKeyFromSecret(keys.signer.secretKey);
    const matches =
      pub.length === keys.signer.publicKey.length && pub.every((b, i) => b === keys.signer.publicKey[i]);
    const sig = sign(keys.signer.secretKey, msg, 'coffer/preflight/v1');
    const verifies = verify(keys.signer.publicKey, msg, sig, 'coffer/preflight/v1');
    return item(
      'keys.signer',
      title,
      matches && verifies ? 'verified' : 'failed',
      { fingerprint: keys.signer.fingerprint, publicHalfMatches: matches, signsAndVerifies: verifies },
      fix,
    );
  } catch (e) {
    return item('keys.signer', title, 'failed', { code: codeOf(e) }, fix);
  }
}

async function probeOperational(keys: EngineKeys): Promise<PreflightItem> {
  const title = 'Operational key present and usable';
  const fix =
    'The operational key file is damaged: restore it from your key backup (ENGINE_OPERATIONAL_KEY_FILE or <data dir>/keys/); without it this engine cannot read its archives back.';
  try {
    const pub = recipientPublicKeyFromSecret(keys.operational.secretKey);
    const matches =
      pub.length === keys.operational.publicKey.length &&
      pub.every((b, i) => b === keys.operational.publicKey[i]);
    const plain = randomBytes(32);
    const aad = canonicalJsonBytes({ preflight: 'operational' });
    const capsule = await seal(keys.operational.publicKey, plain, aad);
    const back = await openSealed(keys.operational.secretKey, capsule, aad);
    const opens = back.length === plain.length && back.every((b, i) => b === plain[i]);
    return item(
      'keys.operational',
      title,
      matches && opens ? 'verified' : 'failed',
      { fingerprint: keys.operational.fingerprint, publicHalfMatches: matches, sealsAndOpens: opens },
      fix,
    );
  } catch (e) {
    return item('keys.operational', title, 'failed', { code: codeOf(e) }, fix);
  }
}

function probeBreakGlass(config: EngineConfig, keys: EngineKeys): PreflightItem {
  const title = 'Break-glass public key set';
  if (keys.breakGlass === null)
    return item(
      'keys.break-glass',
      title,
      'failed',
      { present: false },
      'Generate a break-glass key pair offline (coffer-recover keygen, or the console set-up screen) and give the engine the PUBLIC half (ENGINE_BREAK_GLASS_PUBLIC_KEY or POST /admin/setup/break-glass-key). Runs do not seal until it is set.',
    );
  return item(
    'keys.break-glass',
    title,
    'configured',
    {
      present: true,
      fingerprint: keys.breakGlass.fingerprint,
      source: config.breakGlassPublicKey !== undefined ? 'variable' : 'console',
    },
    'The engine holds only the public half, so it cannot prove the secret half exists: open a sealed archive with coffer-recover and the offline secret key once to be sure.',
  );
}

function probeClock(destinations: Promise<DestinationOutcome[]>, now: () => Date): Promise<PreflightItem> {
  const title = 'Clock sane';
  return destinations.then((outcomes) => {
    const local = now();
    const year = local.getUTCFullYear();
    if (year < 2024 || year > 2200)
      return item(
        'clock',
        title,
        'failed',
        { localTime: local.toISOString() },
        'The system clock is far off: enable time synchronisation (NTP) on the host.',
      );
    const times = outcomes.flatMap((o) =>
      o.serverTime && o.localTime
        ? [{ id: o.item.id.slice('destination:'.length), at: o.serverTime, local: o.localTime }]
        : [],
    );
    if (times.length === 0)
      return item(
        'clock',
        title,
        'configured',
        { localTime: local.toISOString(), reference: null },
        'No object-store destination answered with its own time (filesystem destinations share this clock), so the clock could not be compared: make sure the host synchronises its time (NTP).',
      );
    // Last-Modified (one-second resolution) is the store's time of the write; compare it with this
    // clock right after the write.
    const skews = times.map((t) => ({ destination: t.id, skewMs: t.at.getTime() - t.local.getTime() }));
    const worst = skews.reduce((a, b) => (Math.abs(b.skewMs) > Math.abs(a.skewMs) ? b : a));
    const ok = Math.abs(worst.skewMs) <= CLOCK_MAX_SKEW_MS;
    return item(
      'clock',
      title,
      ok ? 'verified' : 'failed',
      {
        localTime: local.toISOString(),
        reference: 'object-store Last-Modified',
        skews,
        toleranceMs: CLOCK_MAX_SKEW_MS,
      },
      'This clock and the object store disagree by more than five minutes: synchronise the host clock (NTP). Signed times, retention and licence dates depend on it.',
    );
  });
}

async function probeState(state: State): Promise<PreflightItem> {
  const title = 'State store durable';
  await state.ping();
  const d = await state.durability();
  if (d === null)
    return item('state.durable', title, 'verified', {
      backend: state.backend,
      description: state.description,
      answered: true,
    });
  const wal = d.journalMode.toLowerCase() === 'wal';
  const sync = ['full', 'extra', '2', '3'].includes(d.synchronous.toLowerCase());
  return item(
    'state.durable',
    title,
    wal && sync ? 'verified' : 'failed',
    {
      backend: state.backend,
      description: state.description,
      journalMode: d.journalMode,
      synchronous: d.synchronous,
    },
    'The SQLite state database is not in WAL mode with synchronous=FULL: a crash could lose committed writes. Check that the data directory is on a local filesystem that supports WAL, then restart.',
  );
}

async function probeTick(state: State, config: EngineConfig, now: () => Date): Promise<PreflightItem> {
  const title = 'Scheduler ticking';
  const maxAgeMs = Math.max(TICK_MAX_AGE_MS, 2 * config.tickSeconds * 1000 + 5 * 60_000);
  const tick = await state.settings.get<{ at?: unknown; by?: unknown }>(TICK_SETTING);
  const at = typeof tick?.at === 'string' ? tick.at : null;
  const fix =
    'No engine has completed a scheduler tick recently: check that an engine process is running and can take the scheduler lease (its logs name the error), and that the state store is writable.';
  if (at === null || Number.isNaN(Date.parse(at)))
    return item('scheduler.tick', title, 'failed', { lastTick: null, maxAgeMs }, fix);
  const ageMs = now().getTime() - Date.parse(at);
  return item(
    'scheduler.tick',
    title,
    ageMs <= maxAgeMs ? 'verified' : 'failed',
    { lastTick: at, ageMs, maxAgeMs },
    fix,
  );
}

async function probeRestoreRoots(config: EngineConfig): Promise<PreflightItem> {
  const title = 'Restore roots present';
  const roots = config.restoreRoots;
  if (roots.length === 0)
    return item(
      'restore-roots',
      title,
      'unconfigured',
      { roots: 0 },
      'Set ENGINE_RESTORE_ROOTS to the directories a filesystem restore may write into; until then no files or SQLite restore target is allowed.',
    );
  const missing: number[] = [];
  for (const [i, root] of roots.entries()) {
    try {
      if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
      await access(root, constants.W_OK);
    } catch {
      missing.push(i + 1);
    }
  }
  return item(
    'restore-roots',
    title,
    missing.length === 0 ? 'verified' : 'failed',
    { roots: roots.length, writable: roots.length - missing.length, missingEntries: missing },
    'Some ENGINE_RESTORE_ROOTS entries (numbered from 1 in missingEntries) are not writable directories: create them or fix their permissions for the engine user.',
  );
}

async function probeMail(config: EngineConfig, timeoutMs: number): Promise<PreflightItem> {
  const title = 'SMTP reachable';
  if (config.mail === undefined)
    return item(
      'smtp',
      title,
      'unconfigured',
      { configured: false },
      'Set ENGINE_SMTP_URL (and ENGINE_SMTP_USERNAME, ENGINE_SMTP_PASSWORD, ENGINE_MAIL_FROM) so invitations, first-owner links and email notifications can be sent.',
    );
  const r = await probeSmtp(config.mail.url, Math.min(timeoutMs, 5000));
  return item(
    'smtp',
    title,
    r.ok ? 'verified' : 'failed',
    {
      host: r.host,
      port: r.port,
      tls: r.tls,
      greeting: r.greeting,
      ehlo: r.ehlo,
      starttls: r.starttls,
      authenticationTried: false,
      ...(r.ok ? {} : { code: r.code }),
    },
    'The mail server did not answer an SMTP greeting and EHLO: check ENGINE_SMTP_URL (host, port, smtp: or smtps:) and that the engine host may reach it.',
  );
}

async function probeIdps(host: PreflightHost, timeoutMs: number): Promise<PreflightItem[]> {
  const all = await host.identityProviders();
  const enabled = all.filter((c) => c.enabled);
  if (enabled.length === 0)
    return [
      item(
        'identity-providers',
        'Identity providers reachable',
        'unconfigured',
        { connections: all.length, enabled: 0 },
        'No enabled OIDC or SAML connection: people sign in with passkeys only. Add a connection under Identity providers when your organisation uses single sign-on.',
      ),
    ];
  return Promise.all(
    enabled.map(async (c) => {
      const id = `idp:${c.id}`;
      const title = `Identity provider ${c.id} (${c.kind.toUpperCase()}) reachable`;
      const evidence = { connection: c.id, kind: c.kind, source: c.source };
      const fix =
        c.kind === 'oidc'
          ? 'OIDC discovery failed: check the issuer URL and that the engine host may reach it over https.'
          : 'The SAML metadata could not be read: check the metadata URL, or paste the current metadata.';
      try {
        const r = await withTimeout(c.test(), timeoutMs);
        if (!r.ok)
          return item(
            id,
            title,
            'failed',
            { ...evidence, reason: CODE.test(r.reason) ? r.reason : 'unavailable' },
            fix,
          );
        if (c.source === 'pasted-metadata')
          return item(
            id,
            title,
            'configured',
            { ...evidence, metadataPresent: true },
            'The metadata is pasted, so there is nothing to reach: re-paste it when the identity provider rotates its certificate.',
          );
        return item(id, title, 'verified', evidence);
      } catch (e) {
        return item(id, title, 'failed', { ...evidence, code: codeOf(e) }, fix);
      }
    }),
  );
}

async function probeUpdates(host: PreflightHost): Promise<PreflightItem> {
  const title = 'Update channel verified';
  if (host.config.update === undefined)
    return item(
      'update-channel',
      title,
      'unconfigured',
      { configured: false },
      'Set ENGINE_UPDATE_CHANNEL and ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE to receive signed updates (docs/updates.md).',
    );
  const r = await host.updateChannel();
  return item(
    'update-channel',
    title,
    r.verified ? 'verified' : 'failed',
    {
      configured: true,
      verified: r.verified,
      ...(r.sequence != null ? { sequence: r.sequence } : {}),
      ...(r.code ? { code: r.code } : {}),
    },
    'The update channel could not be fetched or did not verify against the pinned signer key: see GET /admin/updates for the code (docs/updates.md).',
  );
}

async function probeCanary(host: PreflightHost, now: () => Date): Promise<PreflightItem> {
  const title = 'Integrity canary fresh';
  const maxAgeMs = Math.max(CANARY_MAX_AGE_MS, 2 * host.config.canaryIntervalSeconds * 1000);
  const last = await new CanaryHistory(host.state.settings).lastSet();
  const fix =
    'The integrity canary has not flown recently or found a destination dead: see GET /admin/canary for each destination and fly one from the console.';
  if (last === null) {
    const upMs = now().getTime() - host.startedAt.getTime();
    return upMs <= maxAgeMs
      ? item(
          'canary',
          title,
          'configured',
          { lastFlightAt: null, verdict: null, maxAgeMs, waitingForFirstFlight: true },
          'The first canary flight is due one interval after start; nothing has flown yet.',
        )
      : item('canary', title, 'failed', { lastFlightAt: null, verdict: null, maxAgeMs }, fix);
  }
  const ageMs = now().getTime() - Date.parse(last.finishedAt);
  const fresh = ageMs <= maxAgeMs;
  return item(
    'canary',
    title,
    fresh && last.verdict === 'alive' ? 'verified' : 'failed',
    {
      lastFlightAt: last.finishedAt,
      verdict: last.verdict,
      ageMs,
      maxAgeMs,
      destinations: last.destinations,
    },
    fix,
  );
}

/** Runs every probe concurrently; never throws (a probe that throws is a `failed` item). */
export async function runPreflight(
  host: PreflightHost,
  options: PreflightOptions = {},
): Promise<PreflightReport> {
  const now = options.now ?? (() => new Date());
  const timeoutMs = options.timeoutMs ?? 10_000;
  const started = Date.now();
  const guard = (id: string, title: string, fix: string, p: () => Promise<PreflightItem | PreflightItem[]>) =>
    withTimeout(Promise.resolve().then(p), timeoutMs).catch((e) =>
      item(
        id,
        title,
        'failed',
        { code: codeOf(e), ...(e instanceof ProbeTimeout ? { timeoutMs } : {}) },
        fix,
      ),
    );
  const destinationRuns = [...host.destinations].map(([id, store]) =>
    withTimeout(probeDestination(id, store, now), timeoutMs).catch(
      (e): DestinationOutcome => ({
        item: item(
          `destination:${id}`,
          `Destination ${id} writable and readable`,
          'failed',
          {
            destination: id,
            description: store.description,
            code: codeOf(e),
            ...(e instanceof ProbeTimeout ? { timeoutMs } : {}),
          },
          'The destination did not answer in time: check that it is reachable from the engine host.',
        ),
        serverTime: null,
        localTime: null,
      }),
    ),
  );
  const destinations = Promise.all(destinationRuns);
  const parts = await Promise.all([
    destinations.then((d) => d.map((o) => o.item)),
    guard(
      'keys.signer',
      'Signer key present and usable',
      'Restore the signer key file from your key backup.',
      async () => probeSigner(host.keys),
    ),
    guard(
      'keys.operational',
      'Operational key present and usable',
      'Restore the operational key file from your key backup.',
      () => probeOperational(host.keys),
    ),
    Promise.resolve(probeBreakGlass(host.config, host.keys)),
    guard('clock', 'Clock sane', 'Synchronise the host clock (NTP).', () => probeClock(destinations, now)),
    guard(
      'state.durable',
      'State store durable',
      'The state store did not answer: check the database (ENGINE_DATABASE_URL) or the data directory.',
      () => probeState(host.state),
    ),
    guard('scheduler.tick', 'Scheduler ticking', 'The state store did not answer: check the database.', () =>
      probeTick(host.state, host.config, now),
    ),
    guard('restore-roots', 'Restore roots present', 'Check ENGINE_RESTORE_ROOTS.', () =>
      probeRestoreRoots(host.config),
    ),
    guard('smtp', 'SMTP reachable', 'Check ENGINE_SMTP_URL and that the engine host may reach it.', () =>
      probeMail(host.config, timeoutMs),
    ),
    guard(
      'identity-providers',
      'Identity providers reachable',
      'The identity-provider connections could not be read: check the state store.',
      () => probeIdps(host, timeoutMs),
    ),
    guard('update-channel', 'Update channel verified', 'See GET /admin/updates for the channel code.', () =>
      probeUpdates(host),
    ),
    guard('canary', 'Integrity canary fresh', 'See GET /admin/canary.', () => probeCanary(host, now)),
  ]);
  const items = parts.flat();
  const summary = { verified: 0, configured: 0, unconfigured: 0, failed: 0, total: items.length };
  for (const i of items) summary[i.status]++;
  return {
    ok: summary.failed === 0,
    checkedAt: now().toISOString(),
    durationMs: Date.now() - started,
    summary,
    items,
  };
}
