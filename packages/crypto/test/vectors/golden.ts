// Builds the golden vectors of Coffer's own composites from fixed seeds. Used two ways:
//   node packages/crypto/test/vectors/golden.ts --write   rewrites the committed files (a FORMAT BREAK:
//                                                          only with a new version byte and a docs/crypto.md change)
//   golden.test.ts                                         checks the committed files against a rebuild
import { writeFileSync } from 'node:fs';
import { shake256 } from '@noble/hashes/sha3.js';
import { encodeKeyFile } from '../../src/internal/key-file.ts';
import { recipientFromSeed, signerFromSeed } from '../../src/internal/keys.ts';
import { nodePlatform } from '../../src/internal/platform-node.ts';
import { PURPOSE_SEAL, PURPOSE_WRAP_KEY, sealWith } from '../../src/internal/seal.ts';
import { signWith } from '../../src/internal/signature.ts';

const enc = new TextEncoder();

function fixed(label: string, length: number): Uint8Array {
  return shake256(enc.encode(`coffer golden vector v1: ${label}`), { dkLen: length });
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

export interface Golden {
  signer: { seed: string; publicKey: string; secretKey: string; message: string; context: string; signature: string };
  recipient: {
    seed: string;
    publicKey: string;
    secretKey: string;
    plaintext: string;
    aad: string;
    ephemeralSecret: string;
    mlkemMessage: string;
    capsule: string;
    wrapDataKey: string;
    wrapCapsule: string;
  };
  keyFiles: Record<'signer-public' | 'signer-secret' | 'recipient-public' | 'recipient-secret', string>;
}

/** Rebuilds every golden value from the fixed seeds (deterministic: no CSPRNG involved). */
export async function buildGolden(): Promise<Golden> {
  const signerSeed = fixed('signer seed', 64);
  const signer = signerFromSeed(signerSeed);
  const message = enc.encode('{"archive":"golden","records":3}');
  const context = 'coffer/golden/v1';
  const signature = signWith(nodePlatform, signer.secretKey, message, context, true);

  const recipientSeed = fixed('recipient seed', 32);
  const recipient = recipientFromSeed(recipientSeed);
  const plaintext = enc.encode('golden plaintext: a data key or a small secret');
  const aad = enc.encode('coffer/golden/aad');
  const randomness = { ephemeralSecret: fixed('ephemeral x25519', 32), mlkemMessage: fixed('ml-kem message', 32) };
  const capsule = await sealWith(nodePlatform, recipient.publicKey, plaintext, aad, PURPOSE_SEAL, randomness);
  const wrapDataKey = fixed('data key', 32);
  const wrapRandomness = { ephemeralSecret: fixed('wrap ephemeral', 32), mlkemMessage: fixed('wrap ml-kem', 32) };
  const wrapCapsule = await sealWith(nodePlatform, recipient.publicKey, wrapDataKey, aad, PURPOSE_WRAP_KEY, wrapRandomness);

  return {
    signer: {
      seed: hex(signerSeed),
      publicKey: hex(signer.publicKey),
      secretKey: hex(signer.secretKey),
      message: hex(message),
      context,
      signature: hex(signature),
    },
    recipient: {
      seed: hex(recipientSeed),
      publicKey: hex(recipient.publicKey),
      secretKey: hex(recipient.secretKey),
      plaintext: hex(plaintext),
      aad: hex(aad),
      ephemeralSecret: hex(randomness.ephemeralSecret),
      mlkemMessage: hex(randomness.mlkemMessage),
      capsule: hex(capsule),
      wrapDataKey: hex(wrapDataKey),
      wrapCapsule: hex(wrapCapsule),
    },
    keyFiles: {
      'signer-public': encodeKeyFile('signer-public', signer.publicKey),
      'signer-secret': encodeKeyFile('signer-secret', signer.secretKey),
      'recipient-public': encodeKeyFile('recipient-public', recipient.publicKey),
      'recipient-secret': encodeKeyFile('recipient-secret', recipient.secretKey),
    },
  };
}

if (process.argv.includes('--write')) {
  const golden = await buildGolden();
  const dir = new URL('.', import.meta.url);
  writeFileSync(new URL('golden-v1.json', dir), `${JSON.stringify(golden, null, 2)}\n`);
  for (const [kind, text] of Object.entries(golden.keyFiles)) {
    writeFileSync(new URL(`golden-${kind}.key`, dir), text);
  }
  console.log('golden vectors written');
}
