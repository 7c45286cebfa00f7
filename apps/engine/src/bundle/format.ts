/**
 * The support bundle's envelope (docs/support-bundle.md; specification "Support bundle" and
 * "Support bundle states"): signing with the engine's hybrid Ed25519 + ML-DSA-87 signer over the
 * RFC 8785 canonical document, and sealing to the vendor support key with a hybrid X25519 +
 * ML-KEM-1024 capsule.
 *
 * Signed kind (`engine-support-bundle-signed`, `v: 1`):
 *   { kind, v, document, signer: { fingerprint, publicKey } | null, signature }
 *   signature = base64url( sign( signerSecret, JCS({ kind, v, document, signer }), SIGN_CONTEXT ) ),
 *   or '' with `signer: null` when the engine has no signer.
 * Sealed kind (`engine-support-bundle-sealed`, `v: 1`):
 *   { kind, v, recipient, capsule }
 *   capsule = base64url( seal( vendorPublic, JCS(inner signed-kind bundle), JCS({ kind, v, recipient }) ) )
 *
 * The signer's public key is embedded so a reader can verify with nothing else; whoever wants more
 * than integrity against accidents pins its fingerprint (`coffer-recover bundle open --pin-signer`),
 * because anybody can sign a bundle with a key of their own. Sealing hides the document from
 * everyone but the holder of the vendor secret key; the engine cannot open what it sealed.
 */
import {
  canonicalJsonBytes,
  fingerprint,
  fromBase64Url,
  open,
  seal,
  sign,
  toBase64Url,
  verify,
} from '@coffer/crypto';

export const SIGNED_KIND = 'engine-support-bundle-signed';
export const SEALED_KIND = 'engine-support-bundle-sealed';
export const BUNDLE_VERSION = 1;
export const SIGN_CONTEXT = 'coffer/engine-support-bundle/v1';

export interface BundleSigner {
  fingerprint: string;
  /** base64url of the signer public key encoding. */
  publicKey: string;
}

export interface SignedBundle {
  kind: typeof SIGNED_KIND;
  v: 1;
  document: Record<string, unknown>;
  signer: BundleSigner | null;
  signature: string;
}

export interface SealedBundle {
  kind: typeof SEALED_KIND;
  v: 1;
  /** Fingerprint of the vendor support public key the capsule is sealed to. */
  recipient: string;
  capsule: string;
}

export type SupportBundle = SignedBundle | SealedBundle;

/** The signed-kind bundle of `document` (empty signature and null signer without a signer). */
export function signBundle(
  document: Record<string, unknown>,
  signer: { secretKey: Uint8Array; publicKey: Uint8Array } | null,
): SignedBundle {
  const head = {
    kind: SIGNED_KIND,
    v: BUNDLE_VERSION,
    document,
    signer: signer
      ? { fingerprint: fingerprint(signer.publicKey), publicKey: toBase64Url(signer.publicKey) }
      : null,
  } as const;
  const signature = signer ? toBase64Url(sign(signer.secretKey, canonicalJsonBytes(head), SIGN_CONTEXT)) : '';
  return { ...head, signature };
}

export function sealedAad(recipient: string): Uint8Array {
  return canonicalJsonBytes({ kind: SEALED_KIND, v: BUNDLE_VERSION, recipient });
}

/** Seals `inner` to the vendor support key. */
export async function sealBundle(inner: SignedBundle, vendorPublicKey: Uint8Array): Promise<SealedBundle> {
  const recipient = fingerprint(vendorPublicKey);
  const capsule = await seal(vendorPublicKey, canonicalJsonBytes(inner), sealedAad(recipient));
  return { kind: SEALED_KIND, v: BUNDLE_VERSION, recipient, capsule: toBase64Url(capsule) };
}

/** The bundle for one of the four states: signed or sealed, signature present or empty. */
export async function makeBundle(
  document: Record<string, unknown>,
  signer: { secretKey: Uint8Array; publicKey: Uint8Array } | null,
  vendorPublicKey: Uint8Array | null,
): Promise<SupportBundle> {
  const inner = signBundle(document, signer);
  return vendorPublicKey ? sealBundle(inner, vendorPublicKey) : inner;
}

/**
 * Reader side (tests and tools; `coffer-recover bundle open` implements the same steps): unseals
 * with `vendorSecretKey` when sealed, then checks the signature. Returns the inner bundle with
 * `signed` (a valid signature) and `sealed`. Throws on a wrong key, tampering or a bad signature.
 */
export async function openBundle(
  bundle: SupportBundle,
  vendorSecretKey?: Uint8Array,
): Promise<{ inner: SignedBundle; signed: boolean; sealed: boolean }> {
  let inner: SignedBundle;
  const sealed = bundle.kind === SEALED_KIND;
  if (bundle.kind === SEALED_KIND) {
    if (!vendorSecretKey) throw new Error('sealed bundle needs the vendor secret key');
    const plain = await open(vendorSecretKey, fromBase64Url(bundle.capsule), sealedAad(bundle.recipient));
    inner = JSON.parse(new TextDecoder().decode(plain)) as SignedBundle;
  } else {
    inner = bundle;
  }
  if (inner.kind !== SIGNED_KIND || inner.v !== BUNDLE_VERSION) throw new Error('not a v1 support bundle');
  if (inner.signature === '' && inner.signer === null) return { inner, signed: false, sealed };
  if (!inner.signer) throw new Error('signature without signer');
  const pub = fromBase64Url(inner.signer.publicKey);
  if (fingerprint(pub) !== inner.signer.fingerprint) throw new Error('signer fingerprint mismatch');
  const { signature, ...head } = inner;
  if (!verify(pub, canonicalJsonBytes(head), fromBase64Url(signature), SIGN_CONTEXT)) {
    throw new Error('bad signature');
  }
  return { inner, signed: true, sealed };
}
