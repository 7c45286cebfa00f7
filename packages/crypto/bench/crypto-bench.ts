// Benchmark of @coffer/crypto (node build, and the browser build's bulk path for reference).
// Run: pnpm --filter @coffer/crypto bench   (prints a table; no assertions: speed targets live here, not in tests)
//
// Bulk figures use 1 MiB buffers, beside node:crypto's own AES-256-GCM and SHA-384 called the
// plain way (one update per buffer) on the same buffers in the same run; ratio = ours / node's.
// Ours and node's are timed alternately on each buffer; figures are medians of per-buffer times.
import { createCipheriv, createDecipheriv, createHash, randomBytes as nodeRandomBytes } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519.js';
import { ml_dsa87 } from '@noble/post-quantum/ml-dsa.js';
import * as web from '../src/browser.ts';
import * as c from '../src/index.ts';

const MiB = 1024 * 1024;
const ROUNDS = 7;

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Operations per second of `f`, run for about `ms` milliseconds per round. */
async function opsPerSecond(f: () => unknown, ms = 300): Promise<number> {
  const rates: number[] = [];
  for (let round = 0; round < 3; round++) {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < ms) {
      await f();
      n++;
    }
    rates.push((n * 1000) / (performance.now() - start));
  }
  return median(rates);
}

/**
 * MiB/s of `ours` and `theirs` on the same 1 MiB buffers, timed alternately buffer by buffer (in
 * alternating order) so both see the same machine load and cache state; each figure is the median
 * per-buffer time over all rounds.
 */
async function compare(
  label: string,
  ours: (b: Uint8Array) => unknown,
  theirs: (b: Uint8Array) => unknown,
  buffers: Uint8Array[],
): Promise<[string, string, string, string]> {
  const a: number[] = [];
  const b: number[] = [];
  for (let round = 0; round < ROUNDS + 1; round++) {
    for (const [i, buf] of buffers.entries()) {
      // Whoever runs second finds the buffer in cache, so the order alternates.
      const oursFirst = (round + i) % 2 === 0;
      let ta = 0;
      let tb = 0;
      for (const which of oursFirst ? ['a', 'b'] : ['b', 'a']) {
        const t0 = performance.now();
        await (which === 'a' ? ours : theirs)(buf);
        if (which === 'a') ta = performance.now() - t0;
        else tb = performance.now() - t0;
      }
      if (round > 0) {
        a.push(ta);
        b.push(tb);
      }
    }
  }
  const ma = 1000 / median(a);
  const mb = 1000 / median(b);
  return [label, ma.toFixed(0), mb.toFixed(0), (ma / mb).toFixed(2)];
}

function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
  console.log();
}

console.log(`@coffer/crypto benchmark: Node ${process.version}, ${process.arch}\n`);

// Signatures.
const msg = nodeRandomBytes(1024);
const ctx = 'coffer/bench';
const signer = c.generateSigner();
const sig = c.sign(signer.secretKey, msg, ctx);
const edSeed = nodeRandomBytes(32);
const edPub = ed25519.getPublicKey(edSeed);
const edSig = ed25519.sign(msg, edSeed);
const dsa = ml_dsa87.keygen(nodeRandomBytes(32));
const dsaSig = ml_dsa87.sign(msg, dsa.secretKey);
const sigRows: string[][] = [];
for (const [label, signF, verifyF] of [
  [
    'hybrid Ed25519 + ML-DSA-87 (sign includes seed expansion)',
    () => c.sign(signer.secretKey, msg, ctx),
    () => c.verify(signer.publicKey, msg, sig, ctx),
  ],
  [
    '  Ed25519 half (@noble/curves)',
    () => ed25519.sign(msg, edSeed),
    () => ed25519.verify(edSig, msg, edPub, { zip215: false }),
  ],
  [
    '  ML-DSA-87 half (@noble/post-quantum)',
    () => ml_dsa87.sign(msg, dsa.secretKey),
    () => ml_dsa87.verify(dsaSig, msg, dsa.publicKey),
  ],
] as const) {
  sigRows.push([label, (await opsPerSecond(signF)).toFixed(0), (await opsPerSecond(verifyF)).toFixed(0)]);
}
printTable(['signatures, 1 KiB message', 'sign/s', 'verify/s'], sigRows);

// Sealing.
const recipient = c.generateRecipient();
const dataKey = nodeRandomBytes(32);
const aad = nodeRandomBytes(32);
const capsule = await c.seal(recipient.publicKey, dataKey, aad);
const wrapped = await c.wrapKey(dataKey, [recipient.publicKey], aad);
printTable(
  ['sealing a 32-byte data key (X25519 + ML-KEM-1024)', 'seal/s', 'open/s'],
  [
    [
      'seal / open',
      (await opsPerSecond(() => c.seal(recipient.publicKey, dataKey, aad))).toFixed(0),
      (await opsPerSecond(() => c.open(recipient.secretKey, capsule, aad))).toFixed(0),
    ],
    [
      'wrapKey (1 recipient) / unwrapKey',
      (await opsPerSecond(() => c.wrapKey(dataKey, [recipient.publicKey], aad))).toFixed(0),
      (await opsPerSecond(() => c.unwrapKey(recipient.secretKey, wrapped, aad))).toFixed(0),
    ],
  ],
);

// Bulk path on 1 MiB buffers.
const count = 32;
const buffers = Array.from({ length: count }, () => new Uint8Array(nodeRandomBytes(MiB)));
const key = new Uint8Array(nodeRandomBytes(32));
const nonce = new Uint8Array(nodeRandomBytes(12));
const aad16 = new Uint8Array(16);
const sealedBuffers = await Promise.all(buffers.map((b) => c.aeadEncrypt(key, nonce, b, aad16)));

function nodeGcmEncrypt(b: Uint8Array): Uint8Array {
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(aad16);
  const out = cipher.update(b);
  cipher.final();
  cipher.getAuthTag();
  return out;
}
function nodeGcmEncryptJoined(b: Uint8Array): Uint8Array {
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(aad16);
  const out = cipher.update(b);
  cipher.final();
  return Buffer.concat([out, cipher.getAuthTag()]);
}
function nodeGcmDecrypt(sealed: Uint8Array): Uint8Array {
  const n = sealed.length - 16;
  const decipher = createDecipheriv('aes-256-gcm', key, nonce);
  decipher.setAAD(aad16);
  decipher.setAuthTag(sealed.subarray(n));
  const out = decipher.update(sealed.subarray(0, n));
  decipher.final();
  return out;
}
function nodeSha384(b: Uint8Array): Uint8Array {
  return createHash('sha384').update(b).digest();
}

const bulkRows = [
  await compare(
    'AES-256-GCM encrypt (aeadEncrypt)',
    (b) => c.aeadEncrypt(key, nonce, b, aad16),
    nodeGcmEncrypt,
    buffers,
  ),
  await compare(
    '  vs node:crypto + Buffer.concat (same ct || tag output)',
    (b) => c.aeadEncrypt(key, nonce, b, aad16),
    nodeGcmEncryptJoined,
    buffers,
  ),
  await compare(
    'AES-256-GCM decrypt (aeadDecrypt)',
    (s) => c.aeadDecrypt(key, nonce, s, aad16),
    nodeGcmDecrypt,
    sealedBuffers,
  ),
  await compare('SHA-384 one-shot (sha384)', (b) => c.sha384(b), nodeSha384, buffers),
  await compare(
    'SHA-384 streaming (createSha384, 1 MiB updates)',
    (b) => c.createSha384().update(b).digest(),
    nodeSha384,
    buffers,
  ),
  await compare(
    'bulk path: SHA-384 + AES-256-GCM of each buffer',
    async (b) => {
      c.sha384(b);
      await c.aeadEncrypt(key, nonce, b, aad16);
    },
    (b) => {
      nodeSha384(b);
      nodeGcmEncrypt(b);
    },
    buffers,
  ),
];
printTable(['bulk, 1 MiB buffers (node build)', 'ours MiB/s', 'node:crypto MiB/s', 'ratio'], bulkRows);

const few = buffers.slice(0, 8);
const webRows = [
  await compare(
    'AES-256-GCM encrypt (WebCrypto)',
    (b) => web.aeadEncrypt(key, nonce, b, aad16),
    nodeGcmEncrypt,
    few,
  ),
  await compare('SHA-384 (@noble/hashes)', (b) => web.sha384(b), nodeSha384, few),
];
printTable(
  ['bulk, browser build run in Node (reference)', 'ours MiB/s', 'node:crypto MiB/s', 'ratio'],
  webRows,
);
console.log('Target: bulk path (node build) at 0.8 or better of node:crypto.');
