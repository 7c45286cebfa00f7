// A software WebAuthn authenticator for tests (package and HTTP): ES256 (P-256) keys from node:crypto,
// `none` attestation, and the exact byte layouts of WebAuthn Level 2 (authenticator data,
// attested credential data, COSE key, CBOR attestation object, client data JSON), so the server
// library checks real bytes. Every field a test wants to break is an option.
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';

/** Minimal canonical CBOR for what WebAuthn needs: unsigned/negative ints, byte and text strings, maps. */
function cbor(value: unknown): Buffer {
  const head = (major: number, n: number): Buffer => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 256) return Buffer.from([(major << 5) | 24, n]);
    if (n < 65536) return Buffer.from([(major << 5) | 25, n >> 8, n & 255]);
    const b = Buffer.alloc(5);
    b[0] = (major << 5) | 26;
    b.writeUInt32BE(n, 1);
    return b;
  };
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const s = Buffer.from(value, 'utf8');
    return Buffer.concat([head(3, s.length), s]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) {
    const parts: Buffer[] = [head(5, value.size)];
    for (const [k, v] of value) parts.push(cbor(k), cbor(v));
    return Buffer.concat(parts);
  }
  throw new Error('cbor: unsupported value');
}

const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest();
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url');

export interface Tweaks {
  origin?: string;
  rpId?: string;
  type?: string;
  /** User verified flag (default true). */
  uv?: boolean;
  /** Signature counter to report (default: the authenticator's, incremented). */
  counter?: number;
  /** Flip a byte of the signature. */
  badSignature?: boolean;
}

export class SoftAuthenticator {
  readonly credentialId = randomBytes(16);
  readonly #privateKey: KeyObject;
  readonly #publicKey: KeyObject;
  readonly #origin: string;
  readonly #rpId: string;
  counter = 0;

  constructor(origin: string, rpId: string) {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.#privateKey = pair.privateKey;
    this.#publicKey = pair.publicKey;
    this.#origin = origin;
    this.#rpId = rpId;
  }

  get id(): string {
    return b64(this.credentialId);
  }

  #cosePublicKey(): Buffer {
    const jwk = this.#publicKey.export({ format: 'jwk' });
    return cbor(
      new Map<number, unknown>([
        [1, 2], // kty: EC2
        [3, -7], // alg: ES256
        [-1, 1], // crv: P-256
        [-2, Buffer.from(jwk.x!, 'base64url')],
        [-3, Buffer.from(jwk.y!, 'base64url')],
      ]),
    );
  }

  #authData(rpId: string, flags: number, counter: number, attested: boolean): Buffer {
    const c = Buffer.alloc(4);
    c.writeUInt32BE(counter);
    const parts: Uint8Array[] = [sha256(rpId), Buffer.from([flags]), c];
    if (attested) {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(this.credentialId.length);
      parts.push(Buffer.alloc(16), len, this.credentialId, this.#cosePublicKey());
    }
    return Buffer.concat(parts);
  }

  #clientData(type: string, challenge: string, origin: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));
  }

  /** The browser's answer to `navigator.credentials.create` for `challenge`. */
  register(challenge: string, tweaks: Tweaks = {}): Record<string, unknown> {
    const flags = 0x01 | (tweaks.uv === false ? 0 : 0x04) | 0x40; // UP, UV, AT
    const authData = this.#authData(tweaks.rpId ?? this.#rpId, flags, tweaks.counter ?? this.counter, true);
    const attestationObject = cbor(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]),
    );
    const clientDataJSON = this.#clientData(
      tweaks.type ?? 'webauthn.create',
      challenge,
      tweaks.origin ?? this.#origin,
    );
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64(clientDataJSON),
        attestationObject: b64(attestationObject),
        transports: ['internal'],
      },
      clientExtensionResults: {},
    };
  }

  /** The browser's answer to `navigator.credentials.get` for `challenge`. */
  authenticate(challenge: string, tweaks: Tweaks = {}): Record<string, unknown> {
    if (tweaks.counter === undefined) this.counter++;
    const flags = 0x01 | (tweaks.uv === false ? 0 : 0x04);
    const authData = this.#authData(tweaks.rpId ?? this.#rpId, flags, tweaks.counter ?? this.counter, false);
    const clientDataJSON = this.#clientData(
      tweaks.type ?? 'webauthn.get',
      challenge,
      tweaks.origin ?? this.#origin,
    );
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), this.#privateKey);
    if (tweaks.badSignature) signature[signature.length - 1]! ^= 1;
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64(clientDataJSON),
        authenticatorData: b64(authData),
        signature: b64(signature),
      },
      clientExtensionResults: {},
    };
  }
}
