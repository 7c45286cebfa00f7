/**
 * Support bundle generation (docs/support-bundle.md): the document (document.ts) in the envelope
 * its keys call for (format.ts), by the specification's "Support bundle states" table:
 *
 * | engine signer | vendor key (ENGINE_SUPPORT_PUBLIC_KEY) | bundle                               |
 * |---------------|----------------------------------------|--------------------------------------|
 * | absent        | absent                                 | signed kind, empty signature         |
 * | absent        | set                                    | sealed kind over the unsigned inner  |
 * | set           | absent                                 | signed kind with signature           |
 * | set           | set                                    | sealed kind over the signed inner    |
 *
 * The engine creates its signer on first start (keys.ts), so a running engine is in the last two
 * rows; the first two are reached by `makeBundle` with no signer (tested there).
 */
import type { EngineFacts } from '../context.ts';
import { type BrowserErrorInput, buildSupportDocument } from './document.ts';
import { makeBundle, SEALED_KIND, type SupportBundle } from './format.ts';

export type { BrowserErrorInput } from './document.ts';
export { MAX_BROWSER_ERROR_BYTES, MAX_BROWSER_ERRORS } from './document.ts';
export * from './format.ts';

/** Generates a bundle; returns it with the facts the audit event records. Throws state errors. */
export async function generateBundle(
  ctx: EngineFacts,
  headSeq: number,
  browserErrors?: BrowserErrorInput[],
): Promise<{
  bundle: SupportBundle;
  facts: { kind: string; signed: boolean; sealed: boolean; browserErrors: number };
}> {
  const document = await buildSupportDocument(ctx, headSeq, browserErrors);
  const signer = ctx.keys.signer ?? null;
  const bundle = await makeBundle(document, signer, ctx.keys.support?.publicKey ?? null);
  return {
    bundle,
    facts: {
      kind: bundle.kind,
      signed: signer !== null,
      sealed: bundle.kind === SEALED_KIND,
      browserErrors: browserErrors?.length ?? 0,
    },
  };
}
