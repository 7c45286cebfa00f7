/**
 * Building a channel document from artefact files (the library half of `coffer-update-publish`;
 * docs/updates.md, "Publishing a channel"). Each artefact's size and SHA-384 are computed from the
 * file itself, so the document can only name bytes the publisher actually has.
 */
import { basename } from 'node:path';
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

export interface PublishInput {
  channel?: string;
  sequence: number;
  issuedAt: Date;
  expiresAt: Date;
  risk?: Risk;
  minEngineVersion?: string;
  requiredSteps?: string[];
  schemaEpoch?: number;
  migration?: boolean;
  engine: PublishArtefact;
  console?: PublishArtefact;
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

/**
 * Builds and checks a channel document (times to whole seconds, UTC). Rejects with
 * ERR_UPDATE_INVALID_ARGUMENT for an unreadable artefact and ERR_UPDATE_MALFORMED_CHANNEL for a
 * document that breaks a rule (bad version, expiry not after issue, ...).
 */
export async function buildChannelDocument(input: PublishInput): Promise<ChannelDocument> {
  const iso = (d: Date) => `${d.toISOString().slice(0, 19)}Z`;
  const doc = {
    kind: CHANNEL_KIND,
    v: 1,
    channel: input.channel ?? 'stable',
    sequence: input.sequence,
    issuedAt: iso(input.issuedAt),
    expiresAt: iso(input.expiresAt),
    recommended: {
      version: input.engine.version,
      ...(input.minEngineVersion !== undefined ? { minEngineVersion: input.minEngineVersion } : {}),
      risk: input.risk ?? 'routine',
      requiredSteps: input.requiredSteps ?? [],
      schemaEpoch: input.schemaEpoch ?? 0,
      migration: input.migration ?? false,
    },
    components: {
      engine: await component(input.engine),
      ...(input.console ? { console: await component(input.console) } : {}),
    },
  };
  return parseChannelDocument(doc);
}
