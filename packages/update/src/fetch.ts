/**
 * Fetching the channel and its artefacts (docs/updates.md, "Fetching"): from an https URL
 * (optionally under a private CA) or from a local file or directory for air-gapped sites.
 *
 * Security-relevant behaviour: the channel document is bounded in size before and while it is
 * read and is verified by {@link verifyChannel} before anything in it is used. An artefact is
 * refused before any byte is requested when its signed size exceeds the caller's bound, refused on
 * a Content-Length that differs from the signed size, and counted and hashed while it streams into
 * a private temporary file; only a file whose size and SHA-384 equal the signed ones is renamed to
 * its final, non-executable name, so no half-written or unverified file ever carries that name.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constantTimeEqual, createSha384, parseDigest } from '@coffer/crypto';
import {
  type ChannelTrust,
  type ComponentName,
  channelComponent,
  type VerifiedChannel,
  verifyChannel,
} from './channel.ts';
import { UpdateError } from './errors.ts';
import { hashFile } from './internal/hash-file.ts';
import { httpsUrl, openGet, readBounded } from './internal/http.ts';

/** Default bound of a channel document: 1 MiB. */
export const DEFAULT_CHANNEL_MAX_BYTES = 1024 * 1024;
/** Default time limit of a channel fetch: 30 s. */
export const DEFAULT_CHANNEL_TIMEOUT_MS = 30_000;
/** Default bound of one artefact: 1 GiB. */
export const DEFAULT_ARTEFACT_MAX_BYTES = 1024 * 1024 * 1024;
/** Default time limit of one artefact download: 10 minutes. */
export const DEFAULT_ARTEFACT_TIMEOUT_MS = 10 * 60_000;
/** The file a channel directory holds. */
export const CHANNEL_FILE = 'channel.json';

export interface FetchChannelOptions {
  /** The pinned signer. */
  trust: ChannelTrust;
  /** PEM text of the CA(s) to trust instead of the system roots (https only). */
  ca?: string | string[];
  timeoutMs?: number;
  maxBytes?: number;
  /** Last accepted sequence and the digest of that document (persisted by the caller). */
  lastSequence?: number;
  lastDigest?: string;
  /** When set, the document's `channel` name must equal it. */
  channel?: string;
  now?: number | Date;
  maxClockSkewMs?: number;
}

function isRemote(location: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(location) && !location.startsWith('file:');
}

function localPath(location: string): string {
  return location.startsWith('file:') ? fileURLToPath(location) : resolve(location);
}

async function readLocalBounded(path: string, maxBytes: number): Promise<Uint8Array> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'r');
  } catch (e) {
    throw new UpdateError(
      'ERR_UPDATE_FETCH',
      `cannot open the channel file (${(e as { code?: string }).code ?? 'error'})`,
    );
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new UpdateError('ERR_UPDATE_FETCH', 'the channel path is not a file');
    if (st.size > maxBytes)
      throw new UpdateError(
        'ERR_UPDATE_TOO_LARGE',
        `the channel file has ${st.size} bytes, more than ${maxBytes}`,
      );
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > maxBytes)
        throw new UpdateError('ERR_UPDATE_TOO_LARGE', `the channel file grew past ${maxBytes} bytes`);
    }
    return new Uint8Array(buf.subarray(0, n));
  } finally {
    await handle.close();
  }
}

/**
 * Fetches and verifies the channel document at `location`: an `https:` URL, a `file:` URL, or a
 * local path to the envelope file or to a directory holding `channel.json`. Resolves to the
 * {@link VerifiedChannel}; rejects with ERR_UPDATE_INSECURE_URL (http, credentials),
 * ERR_UPDATE_REDIRECT (another origin, too many), ERR_UPDATE_FETCH (status, network, TLS),
 * ERR_UPDATE_TIMEOUT, ERR_UPDATE_TOO_LARGE, or any code of {@link verifyChannel}.
 */
export async function fetchChannel(location: string, options: FetchChannelOptions): Promise<VerifiedChannel> {
  const maxBytes = options.maxBytes ?? DEFAULT_CHANNEL_MAX_BYTES;
  let bytes: Uint8Array;
  let source: string;
  if (isRemote(location)) {
    const res = await openGet(httpsUrl(location), {
      ca: options.ca,
      timeoutMs: options.timeoutMs ?? DEFAULT_CHANNEL_TIMEOUT_MS,
      maxBytes,
    });
    try {
      const chunks: Uint8Array[] = [];
      await readBounded(res.body, maxBytes, (c) => {
        chunks.push(c);
      });
      bytes = new Uint8Array(Buffer.concat(chunks));
      source = res.url.href;
    } finally {
      res.close();
    }
  } else {
    let path = localPath(location);
    const st = await stat(path).catch(() => null);
    if (st?.isDirectory()) path = join(path, CHANNEL_FILE);
    bytes = await readLocalBounded(path, maxBytes);
    source = path;
  }
  return verifyChannel(bytes, { ...options, source });
}

export interface DownloadOptions {
  /** Artefacts land in `<dir>/<version>/`. */
  dir: string;
  /** Refuse artefacts whose signed size exceeds this; default 1 GiB. */
  maxBytes?: number;
  ca?: string | string[];
  timeoutMs?: number;
}

/** A verified artefact on disk. */
export interface DownloadedArtefact {
  component: ComponentName;
  version: string;
  path: string;
  sha384: string;
  size: number;
  /** The digest of the channel document the artefact was verified against. */
  channelDigest: string;
  channelSequence: number;
}

function fileNameFor(name: ComponentName, url: string): string {
  const last = url.split(/[/?#]/).filter(Boolean).at(-1) ?? '';
  let decoded = last;
  try {
    decoded = decodeURIComponent(last);
  } catch {}
  return /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/.test(decoded) ? decoded : `${name}.bin`;
}

/**
 * Downloads the `name` artefact of a verified channel into `<dir>/<version>/<file>` and resolves
 * once its size and SHA-384 equal the signed ones. Steps: bound check on the signed size
 * (ERR_UPDATE_TOO_LARGE, before any request); GET (https, same-origin redirects only) or local
 * read, relative URLs resolved against the channel's own location; Content-Length equal to the
 * signed size (ERR_UPDATE_TOO_LARGE when larger, ERR_UPDATE_ARTEFACT_SIZE when smaller); bytes
 * counted (ERR_UPDATE_TOO_LARGE past the signed size, ERR_UPDATE_ARTEFACT_SIZE when short) and
 * hashed (ERR_UPDATE_ARTEFACT_HASH) while streaming into a 0600 temporary file; fsync, chmod 0644,
 * rename. On any failure the temporary file is removed and nothing else changes.
 */
export async function downloadArtefact(
  channel: VerifiedChannel,
  name: ComponentName,
  options: DownloadOptions,
): Promise<DownloadedArtefact> {
  const component = channelComponent(channel, name);
  const bound = options.maxBytes ?? DEFAULT_ARTEFACT_MAX_BYTES;
  if (component.size > bound)
    throw new UpdateError(
      'ERR_UPDATE_TOO_LARGE',
      `the ${name} artefact is signed at ${component.size} bytes, more than the bound of ${bound}`,
    );
  const targetDir = join(resolve(options.dir), component.version);
  await mkdir(targetDir, { recursive: true, mode: 0o700 });
  const finalPath = join(targetDir, fileNameFor(name, component.url));
  const tempPath = join(targetDir, `.${name}-${randomBytes(8).toString('hex')}.partial`);
  const out = await open(tempPath, 'wx', 0o600);
  let closed = false;
  const hasher = createSha384();
  const write = async (chunk: Uint8Array) => {
    hasher.update(chunk);
    await out.write(chunk);
  };
  try {
    let received: number;
    if (isRemote(channel.source) || /^https:/i.test(component.url)) {
      const url = httpsUrl(new URL(component.url, channel.source));
      const res = await openGet(url, {
        ca: options.ca,
        timeoutMs: options.timeoutMs ?? DEFAULT_ARTEFACT_TIMEOUT_MS,
        maxBytes: component.size,
      });
      try {
        if (res.contentLength !== undefined && res.contentLength !== component.size)
          throw new UpdateError(
            'ERR_UPDATE_ARTEFACT_SIZE',
            `the ${name} artefact is announced at ${res.contentLength} bytes, signed at ${component.size}`,
          );
        received = await readBounded(res.body, component.size, write);
      } finally {
        res.close();
      }
    } else {
      const path = join(dirname(channel.source), component.url);
      const st = await stat(path).catch(() => null);
      if (!st?.isFile()) throw new UpdateError('ERR_UPDATE_FETCH', `the ${name} artefact file is missing`);
      if (st.size > component.size)
        throw new UpdateError(
          'ERR_UPDATE_TOO_LARGE',
          `the ${name} artefact file has ${st.size} bytes, signed at ${component.size}`,
        );
      received = await readBounded(createReadStream(path), component.size, write);
    }
    if (received !== component.size)
      throw new UpdateError(
        'ERR_UPDATE_ARTEFACT_SIZE',
        `the ${name} artefact has ${received} bytes, signed at ${component.size}`,
      );
    const got = hasher.digest();
    if (!constantTimeEqual(got, parseDigest(component.sha384)))
      throw new UpdateError(
        'ERR_UPDATE_ARTEFACT_HASH',
        `the ${name} artefact's SHA-384 differs from the signed channel (sequence ${channel.document.sequence})`,
      );
    await out.sync();
    await out.close();
    closed = true;
    await chmod(tempPath, 0o644);
    await rename(tempPath, finalPath);
  } catch (e) {
    if (!closed) await out.close().catch(() => {});
    await rm(tempPath, { force: true });
    throw e;
  }
  return {
    component: name,
    version: component.version,
    path: finalPath,
    sha384: component.sha384,
    size: component.size,
    channelDigest: channel.digest,
    channelSequence: channel.document.sequence,
  };
}

/**
 * Re-hashes a file on disk and checks it against a component of a verified channel (used for a
 * file already downloaded, and by deployers' read-back). Resolves to the file's `sha384:` digest;
 * rejects with ERR_UPDATE_ARTEFACT_SIZE or ERR_UPDATE_ARTEFACT_HASH.
 */
export async function verifyArtefactFile(
  path: string,
  expected: { sha384: string; size: number },
): Promise<string> {
  const got = await hashFile(path);
  if (got.size !== expected.size)
    throw new UpdateError(
      'ERR_UPDATE_ARTEFACT_SIZE',
      `${basename(path)} has ${got.size} bytes, signed at ${expected.size}`,
    );
  if (got.sha384 !== expected.sha384)
    throw new UpdateError(
      'ERR_UPDATE_ARTEFACT_HASH',
      `${basename(path)}'s SHA-384 differs from the signed channel`,
    );
  return got.sha384;
}
