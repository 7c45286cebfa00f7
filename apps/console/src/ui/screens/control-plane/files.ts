/**
 * Reading the files a person picks (never uploaded as such): an export (signed or sealed) is
 * parsed and recognised by its kind; key files are read as text only when used.
 */
import { type ExportFile, SEALED_KIND, SIGNED_KIND } from './types.ts';

/** Exports carry whole run-history rings; the engine accepts 32 MiB. */
const MAX_EXPORT_BYTES = 32 * 1024 * 1024;
const MAX_KEY_BYTES = 1024 * 1024;

export async function readExportFile(file: File): Promise<ExportFile> {
  if (file.size > MAX_EXPORT_BYTES)
    throw new Error(`${file.name} is too large to be a control-plane export.`);
  let body: unknown;
  try {
    body = JSON.parse(await file.text());
  } catch {
    throw new Error(`${file.name} is not JSON: choose the file the export download saved.`);
  }
  const kind = typeof body === 'object' && body !== null ? (body as { kind?: unknown }).kind : undefined;
  if (kind === SIGNED_KIND) return { kind: 'signed', body: body as Record<string, unknown>, name: file.name };
  if (kind === SEALED_KIND) return { kind: 'sealed', body: body as Record<string, unknown>, name: file.name };
  throw new Error(`${file.name} is not a control-plane export (signed or sealed).`);
}

export async function readKeyText(file: File, what: string): Promise<string> {
  if (file.size > MAX_KEY_BYTES) throw new Error(`${file.name} is too large to be ${what}.`);
  return file.text();
}

/** The body `restore` and `import` take: the signed envelope's fields, nothing else. */
export function signedFields(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['v', 'kind', 'signerFingerprint', 'export', 'signature'])
    if (body[k] !== undefined) out[k] = body[k];
  return out;
}
