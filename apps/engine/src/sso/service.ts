/**
 * The engine's single sign-on service: the connection store (settings `idp.connection.<id>`), the
 * sealed client secrets, the normalisation a connection write passes, and the runtime pieces the
 * sign-in routes need: a discovered OIDC provider (cached per connection revision for five
 * minutes), a SAML connection with its IdP metadata (a metadata URL is re-read every ten minutes;
 * a failed read is the caller's 503), the OIDC transaction-cookie key, and the URLs built from
 * CONSOLE_ORIGIN. The protocol itself is @coffer/identity's; this file only holds configuration.
 */
import { hkdfSync } from 'node:crypto';
import {
  checkOidcConnection,
  checkSamlConnection,
  discoverOidcProvider,
  fetchIdpMetadata,
  type SamlIdpMetadata as IdpMetadata,
  isIdentityError,
  type OidcConnection,
  type OidcProvider,
  parseIdpMetadata,
  type SamlConnection,
  samlCertificateFingerprint,
} from '@coffer/identity';
import type { State } from '@coffer/state';
import { operationalSecretBox } from '../keys.ts';
import {
  ConnectionInputError,
  type ConnectionKind,
  checkConnectionId,
  checkDisplayName,
  checkDomains,
  checkMapping,
  checkMetadataUrl,
  checkOptionalName,
  checkRequiredText,
  checkScopes,
  connectionUrls,
  MAX_CONNECTIONS,
  SETTINGS_PREFIX,
  type StoredConnection,
  type StoredSaml,
  viewConnection,
} from './connections.ts';
import { presetById } from './presets.ts';

const DISCOVERY_TTL_MS = 5 * 60 * 1000;
const METADATA_TTL_MS = 10 * 60 * 1000;
const PROVIDER_TIMEOUT_MS = 10_000;
const MAX_METADATA_XML = 1024 * 1024;

type Body = Record<string, unknown>;

export interface SsoServiceOptions {
  state: State;
  operationalSecretKey: Uint8Array;
  consoleOrigin: string | undefined;
}

/** The IdP metadata could not be read (the SAML routes' 503). */
export class SsoUnavailableError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(`identity provider unavailable (${reason})`);
    this.reason = reason;
  }
}

export class SsoService {
  readonly #state: State;
  readonly #box: ReturnType<typeof operationalSecretBox>;
  readonly consoleOrigin: string | undefined;
  /** The HMAC key of the OIDC transaction cookie (every replica derives the same one). */
  readonly transactionKey: Uint8Array;
  readonly #providers = new Map<string, { rev: number; at: number; provider: OidcProvider }>();
  readonly #metadata = new Map<string, { rev: number; at: number; metadata: IdpMetadata }>();

  constructor(options: SsoServiceOptions) {
    this.#state = options.state;
    this.consoleOrigin = options.consoleOrigin;
    this.#box = operationalSecretBox(options.operationalSecretKey, {
      info: 'coffer/idp-secret-box/v1',
      prefix: 'cib1.',
    });
    this.transactionKey = new Uint8Array(
      hkdfSync('sha384', options.operationalSecretKey, Buffer.alloc(0), 'coffer/oidc-transaction/v1', 32),
    );
  }

  // ---- the store ------------------------------------------------------------------------------

  async list(): Promise<StoredConnection[]> {
    const rows = await this.#state.settings.list(SETTINGS_PREFIX);
    return rows
      .map((r) => r.value as StoredConnection)
      .filter((c) => c !== null && typeof c === 'object' && c.v === 1)
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  async get(id: string): Promise<StoredConnection | null> {
    if (typeof id !== 'string' || !/^[a-z0-9][a-z0-9-]{0,63}$/.test(id)) return null;
    const value = await this.#state.settings.get<StoredConnection>(SETTINGS_PREFIX + id);
    return value !== undefined && value !== null && value.v === 1 ? value : null;
  }

  /** An enabled connection of `kind`, or null. */
  async enabled(id: string, kind: ConnectionKind): Promise<StoredConnection | null> {
    const c = await this.get(id);
    return c?.enabled && c.kind === kind ? c : null;
  }

  view(c: StoredConnection) {
    return viewConnection(c, this.consoleOrigin, samlCertificateFingerprint);
  }

  urls(id: string, kind: ConnectionKind) {
    return connectionUrls(id, kind, this.consoleOrigin);
  }

  /** Creates a connection; ConnectionInputError for bad input, `exists` when the id is taken. */
  async create(
    body: Body,
    actor: string | null,
  ): Promise<{ connection: StoredConnection } | { exists: true }> {
    const id = checkConnectionId(body.id);
    const kind = body.kind;
    if (kind !== 'oidc' && kind !== 'saml')
      throw new ConnectionInputError('kind', 'kind must be oidc or saml');
    if ((await this.list()).length >= MAX_CONNECTIONS)
      throw new ConnectionInputError('id', `at most ${MAX_CONNECTIONS} connections`);
    const connection = await this.#normalise(body, { id, kind, previous: null, actor });
    const created = await this.#state.settings.setIfAbsent(SETTINGS_PREFIX + id, connection);
    if (!created) return { exists: true };
    this.#forget(id);
    return { connection };
  }

  /**
   * Applies an update: fields absent from `body` keep their value; `oidc.clientSecret` absent keeps
   * the secret, a string replaces it, null clears it. `ifMatchRev` (optional) must equal the stored
   * revision. Returns null when the id is unknown, `conflict` on a revision mismatch.
   */
  async update(
    body: Body,
    actor: string | null,
  ): Promise<{ before: StoredConnection; connection: StoredConnection } | { conflict: number } | null> {
    const previous = await this.get(typeof body.id === 'string' ? body.id : '');
    if (previous === null) return null;
    if (body.ifMatchRev !== undefined && body.ifMatchRev !== previous.rev) return { conflict: previous.rev };
    if (body.kind !== undefined && body.kind !== previous.kind)
      throw new ConnectionInputError('kind', 'kind cannot change; delete and create the connection');
    const connection = await this.#normalise(body, {
      id: previous.id,
      kind: previous.kind,
      previous,
      actor,
    });
    await this.#state.settings.set(SETTINGS_PREFIX + previous.id, connection);
    this.#forget(previous.id);
    return { before: previous, connection };
  }

  async delete(id: string): Promise<StoredConnection | null> {
    const previous = await this.get(id);
    if (previous === null) return null;
    await this.#state.settings.delete(SETTINGS_PREFIX + id);
    this.#forget(id);
    return previous;
  }

  #forget(id: string): void {
    this.#providers.delete(id);
    this.#metadata.delete(id);
  }

  async #normalise(
    body: Body,
    ctx: { id: string; kind: ConnectionKind; previous: StoredConnection | null; actor: string | null },
  ): Promise<StoredConnection> {
    const prev = ctx.previous;
    const pick = (k: string) => (body[k] !== undefined ? body[k] : prev?.[k as keyof StoredConnection]);
    const presetId = pick('preset');
    if (presetId !== undefined && presetId !== null) {
      const preset = typeof presetId === 'string' ? presetById(presetId) : undefined;
      if (preset === undefined || preset.kind !== ctx.kind)
        throw new ConnectionInputError('preset', `preset must be one of the ${ctx.kind} presets`);
    }
    if (pick('enabled') !== undefined && typeof pick('enabled') !== 'boolean')
      throw new ConnectionInputError('enabled', 'enabled must be true or false');
    const base = {
      v: 1 as const,
      id: ctx.id,
      kind: ctx.kind,
      displayName: checkDisplayName(pick('displayName')),
      preset: (presetId as string | null | undefined) ?? null,
      enabled: (pick('enabled') as boolean | undefined) ?? true,
      allowedEmailDomains: checkDomains(pick('allowedEmailDomains')),
      groupRoleMapping: await checkMapping(
        pick('groupRoleMapping'),
        async (name) => (await this.#state.roles.getCustomRole(name)) !== null,
      ),
      rev: (prev?.rev ?? 0) + 1,
      updatedAt: new Date().toISOString(),
      updatedBy: ctx.actor,
    };
    if (ctx.kind === 'oidc') {
      const given = (body.oidc ?? {}) as Body;
      if (typeof given !== 'object' || given === null)
        throw new ConnectionInputError('oidc', 'oidc must be an object');
      const before = prev?.oidc;
      const field = <T>(k: string, fallback: T) => (given[k] !== undefined ? given[k] : fallback);
      const issuer = checkRequiredText(field('issuer', before?.issuer), 'oidc.issuer');
      const clientId = checkRequiredText(field('clientId', before?.clientId), 'oidc.clientId', 512);
      let clientSecretSealed = before?.clientSecretSealed ?? null;
      if (given.clientSecret === null) clientSecretSealed = null;
      else if (given.clientSecret !== undefined)
        clientSecretSealed = this.#box.seal(checkRequiredText(given.clientSecret, 'oidc.clientSecret', 4096));
      const oidc = {
        issuer,
        clientId,
        clientSecretSealed,
        scopes: checkScopes(field('scopes', before?.scopes)),
        groupsClaim: checkOptionalName(field('groupsClaim', before?.groupsClaim), 'oidc.groupsClaim'),
      };
      const connection: StoredConnection = { ...base, oidc };
      try {
        checkOidcConnection(this.#oidcConnection(connection));
      } catch (err) {
        throw asInputError(err, 'oidc.issuer');
      }
      return connection;
    }
    const given = (body.saml ?? {}) as Body;
    if (typeof given !== 'object' || given === null)
      throw new ConnectionInputError('saml', 'saml must be an object');
    const before = prev?.saml;
    let side: Pick<StoredSaml, 'idpMetadataUrl' | 'idpEntityId' | 'idpSsoUrl' | 'idpCertificates'>;
    if (
      given.idpMetadataXml !== undefined &&
      given.idpMetadataUrl !== undefined &&
      given.idpMetadataUrl !== null
    )
      throw new ConnectionInputError(
        'saml.idpMetadataXml',
        'give the IdP metadata as XML or as a URL, not both',
      );
    if (given.idpMetadataXml !== undefined) {
      if (typeof given.idpMetadataXml !== 'string' || given.idpMetadataXml.length > MAX_METADATA_XML)
        throw new ConnectionInputError(
          'saml.idpMetadataXml',
          'saml.idpMetadataXml must be XML text of at most 1 MiB',
        );
      side = { idpMetadataUrl: null, ...fromMetadata(parseOr400(given.idpMetadataXml)) };
    } else if (given.idpMetadataUrl !== undefined) {
      const url = checkMetadataUrl(given.idpMetadataUrl);
      let metadata: IdpMetadata;
      try {
        metadata = await fetchIdpMetadata(url, { timeoutMs: PROVIDER_TIMEOUT_MS });
      } catch (err) {
        throw asInputError(err, 'saml.idpMetadataUrl', 'the IdP metadata could not be read from that URL');
      }
      side = { idpMetadataUrl: url, ...fromMetadata(metadata) };
    } else if (before !== undefined) {
      side = before;
    } else {
      throw new ConnectionInputError(
        'saml.idpMetadataXml',
        'a SAML connection needs the IdP metadata (XML or URL)',
      );
    }
    const saml: StoredSaml = {
      ...side,
      emailAttribute: checkOptionalName(
        given.emailAttribute !== undefined ? given.emailAttribute : before?.emailAttribute,
        'saml.emailAttribute',
      ),
      groupsAttribute: checkOptionalName(
        given.groupsAttribute !== undefined ? given.groupsAttribute : before?.groupsAttribute,
        'saml.groupsAttribute',
      ),
    };
    const connection: StoredConnection = { ...base, saml };
    try {
      checkSamlConnection(this.#samlConnection(connection, connection.saml!));
    } catch (err) {
      throw asInputError(err, 'saml');
    }
    return connection;
  }

  // ---- runtime --------------------------------------------------------------------------------

  #oidcConnection(c: StoredConnection): OidcConnection {
    const o = c.oidc!;
    return {
      id: c.id,
      issuer: o.issuer,
      clientId: o.clientId,
      ...(o.clientSecretSealed !== null ? { clientSecret: this.#box.open(o.clientSecretSealed) } : {}),
      allowedEmailDomains: c.allowedEmailDomains,
      scopes: o.scopes,
      ...(o.groupsClaim !== null ? { groupsClaim: o.groupsClaim } : {}),
    };
  }

  #samlConnection(
    c: StoredConnection,
    side: Pick<StoredSaml, 'idpEntityId' | 'idpSsoUrl' | 'idpCertificates'>,
  ): SamlConnection {
    const s = c.saml!;
    const urls = this.urls(c.id, 'saml');
    return {
      id: c.id,
      idpEntityId: side.idpEntityId,
      idpSsoUrl: side.idpSsoUrl,
      idpCertificates: side.idpCertificates,
      allowedEmailDomains: c.allowedEmailDomains,
      ...(s.emailAttribute !== null ? { emailAttribute: s.emailAttribute } : {}),
      ...(s.groupsAttribute !== null ? { groupsAttribute: s.groupsAttribute } : {}),
      // Without CONSOLE_ORIGIN nothing can sign in; the placeholders keep the check meaningful.
      spEntityId: urls.spEntityId ?? `https://console.invalid/admin/saml/metadata/${c.id}`,
      acsUrl: urls.acsUrl ?? `https://console.invalid/admin/saml/acs/${c.id}`,
    };
  }

  /** The discovered provider (cached per revision); throws the package's OIDC errors. */
  async oidcProvider(c: StoredConnection): Promise<OidcProvider> {
    const cached = this.#providers.get(c.id);
    if (cached && cached.rev === c.rev && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.provider;
    const provider = await discoverOidcProvider(this.#oidcConnection(c), { timeoutMs: PROVIDER_TIMEOUT_MS });
    this.#providers.set(c.id, { rev: c.rev, at: Date.now(), provider });
    return provider;
  }

  /**
   * The SAML connection with the IdP side current: pasted metadata as stored, a metadata URL
   * re-read when the cached read is older than ten minutes. Throws SsoUnavailableError when the
   * metadata cannot be read (the routes' 503: fail closed, never on stale keys past the TTL).
   */
  async samlConnection(c: StoredConnection): Promise<SamlConnection> {
    const s = c.saml!;
    if (s.idpMetadataUrl === null) return this.#samlConnection(c, s);
    const cached = this.#metadata.get(c.id);
    if (cached && cached.rev === c.rev && Date.now() - cached.at < METADATA_TTL_MS)
      return this.#samlConnection(c, fromMetadata(cached.metadata));
    let metadata: IdpMetadata;
    try {
      metadata = await fetchIdpMetadata(s.idpMetadataUrl, { timeoutMs: PROVIDER_TIMEOUT_MS });
    } catch (err) {
      throw new SsoUnavailableError(
        isIdentityError(err) ? (err.refusal ?? err.code) : 'metadata-unreachable',
      );
    }
    this.#metadata.set(c.id, { rev: c.rev, at: Date.now(), metadata });
    return this.#samlConnection(c, fromMetadata(metadata));
  }

  /** The connection test: discovery or a metadata read, uncached. */
  async test(c: StoredConnection): Promise<{ ok: true } | { ok: false; reason: string }> {
    this.#forget(c.id);
    try {
      if (c.kind === 'oidc') await this.oidcProvider(c);
      else await this.samlConnection(c);
      return { ok: true };
    } catch (err) {
      if (err instanceof SsoUnavailableError) return { ok: false, reason: err.reason };
      if (isIdentityError(err)) return { ok: false, reason: err.refusal ?? err.code };
      return { ok: false, reason: 'unavailable' };
    }
  }
}

function fromMetadata(m: IdpMetadata): Pick<StoredSaml, 'idpEntityId' | 'idpSsoUrl' | 'idpCertificates'> {
  return { idpEntityId: m.entityId, idpSsoUrl: m.ssoUrl, idpCertificates: [...m.certificates] };
}

function parseOr400(xml: string): IdpMetadata {
  try {
    return parseIdpMetadata(xml);
  } catch (err) {
    throw asInputError(err, 'saml.idpMetadataXml', 'the IdP metadata is not usable SAML metadata');
  }
}

/** The package's refusal as a field error (its message names fields, never values). */
function asInputError(err: unknown, field: string, fallback?: string): ConnectionInputError {
  if (err instanceof ConnectionInputError) return err;
  if (isIdentityError(err)) return new ConnectionInputError(field, fallback ?? err.message);
  return new ConnectionInputError(field, fallback ?? `${field} is not usable`);
}
