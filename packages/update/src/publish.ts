/**
 * Building a channel document from artefact files (the library half of `coffer-update-publish`;
 * docs/updates.md, "Publishing a channel") or from artefacts held in memory. Each artefact's size
 * and SHA-384 are computed from the file or the bytes themselves, so the document can only name
 * bytes the publisher actually has.
 */
import { basename } from 'node:path';
import { sha384Digest } from '@coffer/crypto';
import {
  CHANNEL_KIND,
  type ChannelComponent,
  type ChannelDocument,
  parseChannelDocument,
  type Risk,
} from './channel.ts';
import { UpdateError } from './errors.ts';
import { hashFile } from './internal/hash-file.ts';

export interface PublishArtefact {
  /** The artefact file. */
  file: string;
  /** Its version (the engine's is the release version). */
  version: string;
  /** Where clients fetch it; default the file's name, relative to the channel document. */
  url?: string;
}

/** An artefact held in memory (a pipeline that builds its tarballs without writing them first). */
export interface PublishBytes {
  /** The artefact's bytes. */
  bytes: Uint8Array;
  /** Its version (the engine's is the release version). */
  version: string;
  /** Where clients fetch it, relative to the channel document (there is no file name to default to). */
  url: string;
}

/** What a channel document says besides its artefacts (PublishInput without `engine`, `console`). */
interface PublishRelease {
  channel?: string;
  sequence: number;
  issuedAt: Date;
  expiresAt: Date;
  risk?: Risk;
  minEngineVersion?: string;
  requiredSteps?: string[];
  schemaEpoch?: number;
  migration?: boolean;
}

export interface PublishInput extends PublishRelease {
  engine: PublishArtefact;
  console?: PublishArtefact;
}

/** PublishInput with the artefacts held in memory. */
export interface PublishBytesInput extends PublishRelease {
  engine: PublishBytes;
  console?: PublishBytes;
}

async function component(a: PublishArtefact): Promise<ChannelComponent> {
  let h: { sha384: string; size: number };
  try {
    h = await hashFile(a.file);
  } catch (e) {
    throw new UpdateError(
      'ERR_UPDATE_INVALID_ARGUMENT',
      `cannot read the artefact ${basename(a.file)} (${(e as { code?: string }).code ?? 'error'})`,
    );
  }
  return { version: a.version, url: a.url ?? encodeURIComponent(basename(a.file)), ...h };
}

function bytesComponent(a: PublishBytes): ChannelComponent {
  if (!(a?.bytes instanceof Uint8Array))
    throw new UpdateError('ERR_UPDATE_INVALID_ARGUMENT', 'artefact bytes must be a Uint8Array');
  return { version: a.version, url: a.url, sha384: sha384Digest(a.bytes), size: a.bytes.byteLength };
}

/** The document around its artefacts' components, checked (times to whole seconds, UTC). */
function channelDocument(
  input: PublishRelease,
  engine: ChannelComponent,
  consoleComponent: ChannelComponent | undefined,
): ChannelDocument {
  const iso = (d: Date) => `${d.toISOString().slice(0, 19)}Z`;
  const doc = {
    kind: CHANNEL_KIND,
    v: 1,
    channel: input.channel ?? 'stable',
    sequence: input.sequence,
    issuedAt: iso(input.issuedAt),
    expiresAt: iso(input.expiresAt),
    recommended: {
      version: engine.version,
      ...(input.minEngineVersion !== undefined ? { minEngineVersion: input.minEngineVersion } : {}),
      risk: input.risk ?? 'routine',
      requiredSteps: input.requiredSteps ?? [],
      schemaEpoch: input.schemaEpoch ?? 0,
      migration: input.migration ?? false,
    },
    components: { engine, ...(consoleComponent ? { console: consoleComponent } : {}) },
  };
  return parseChannelDocument(doc);
}

/**
 * Builds and checks a channel document (times to whole seconds, UTC). Rejects with
 * ERR_UPDATE_INVALID_ARGUMENT for an unreadable artefact and ERR_UPDATE_MALFORMED_CHANNEL for a
 * document that breaks a rule (bad version, expiry not after issue, ...).
 */
export async function buildChannelDocument(input: PublishInput): Promise<ChannelDocument> {
  const engine = await component(input.engine);
  return channelDocument(input, engine, input.console ? await component(input.console) : undefined);
}

/**
 * buildChannelDocument for artefacts held in memory: each size and SHA-384 is computed from the
 * bytes. Throws ERR_UPDATE_INVALID_ARGUMENT when an artefact's bytes are not a Uint8Array and
 * ERR_UPDATE_MALFORMED_CHANNEL for a document that breaks a rule (bad version or URL, expiry not
 * after issue, ...).
 */
export function buildChannelDocumentFromBytes(input: PublishBytesInput): ChannelDocument {
  return channelDocument(
    input,
    bytesComponent(input.engine),
    input.console ? bytesComponent(input.console) : undefined,
  );
}
