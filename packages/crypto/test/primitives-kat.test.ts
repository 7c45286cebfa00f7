// Known-answer tests for every primitive under the composites, from published vectors.
// Sources and revisions are listed in test/vectors/README.md.
import { hkdfSync } from 'node:crypto';
import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha384 as nobleSha384, sha256 } from '@noble/hashes/sha2.js';
import { sha3_256, shake128 } from '@noble/hashes/sha3.js';
import { ml_dsa87 } from '@noble/post-quantum/ml-dsa.js';
import { ml_kem1024 } from '@noble/post-quantum/ml-kem.js';
import t from 'tap';
import { fromHex, toHex } from '../src/internal/bytes.ts';
import { nodePlatform } from '../src/internal/platform-node.ts';
import { webPlatform } from '../src/internal/platform-web.ts';

const enc = new TextEncoder();
const platforms = [nodePlatform, webPlatform];

t.test('SHA-384: FIPS 180-2 appendix D examples, one-shot and streamed, both platforms', async (t) => {
  const cases: [Uint8Array, string][] = [
    [
      new Uint8Array(0),
      '38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b',
    ],
    [
      enc.encode('abc'),
      'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7',
    ],
    [
      enc.encode(
        'abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu',
      ),
      '09330c33f71147e83d192fc782cd1b4753111b173b3b05d22fa08086e3b0f712fcc7c71a557e2db966c3e9fa91746039',
    ],
  ];
  for (const p of platforms) {
    for (const [input, expected] of cases) {
      t.equal(toHex(p.sha384(input)), expected, `${p.name} one-shot`);
      const h = p.createSha384();
      for (let i = 0; i < input.length; i += 7) h.update(input.subarray(i, i + 7));
      t.equal(toHex(h.digest()), expected, `${p.name} streamed`);
    }
  }
});

t.test('AES-256-GCM: McGrew-Viega GCM spec test cases 13, 14 and 16, both platforms', async (t) => {
  const cases = [
    { k: '00'.repeat(32), iv: '00'.repeat(12), p: '', a: '', c: '', tag: '530f8afbc74536b9a963b4f1c4cb738b' },
    {
      k: '00'.repeat(32),
      iv: '00'.repeat(12),
      p: '00'.repeat(16),
      a: '',
      c: 'cea7403d4d606b6e074ec5d3baf39d18',
      tag: 'd0d1c8a799996bf0265b98b5d48ab919',
    },
    {
      k: 'feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308',
      iv: 'cafebabefacedbaddecaf888',
      p: 'd9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39',
      a: 'feedfacedeadbeeffeedfacedeadbeefabaddad2',
      c: '522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662',
      tag: '76fc6ece0f4e1768cddf8853bb2d551b',
    },
  ];
  for (const p of platforms) {
    for (const v of cases) {
      const sealed = await p.aesGcmEncrypt(fromHex(v.k), fromHex(v.iv), fromHex(v.p), fromHex(v.a));
      t.equal(toHex(sealed), v.c + v.tag, `${p.name} encrypt`);
      const opened = await p.aesGcmDecrypt(fromHex(v.k), fromHex(v.iv), sealed, fromHex(v.a));
      t.equal(opened === null ? null : toHex(opened), v.p, `${p.name} decrypt`);
    }
  }
});

t.test('Ed25519: RFC 8032 section 7.1 tests 1-3 (strict verification)', async (t) => {
  const cases = [
    {
      sk: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
      pk: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
      msg: '',
      sig: 'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    },
    {
      sk: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
      pk: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
      msg: '72',
      sig: '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
    },
    {
      sk: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
      pk: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
      msg: 'af82',
      sig: '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
    },
  ];
  for (const v of cases) {
    t.equal(toHex(ed25519.getPublicKey(fromHex(v.sk))), v.pk);
    t.equal(toHex(ed25519.sign(fromHex(v.msg), fromHex(v.sk))), v.sig);
    t.ok(ed25519.verify(fromHex(v.sig), fromHex(v.msg), fromHex(v.pk), { zip215: false }));
  }
});

t.test('X25519: RFC 7748 sections 5.2 and 6.1', async (t) => {
  t.equal(
    toHex(
      x25519.getSharedSecret(
        fromHex('a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4'),
        fromHex('e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c'),
      ),
    ),
    'c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552',
  );
  const alice = fromHex('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a');
  const bob = fromHex('5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb');
  const alicePub = '8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a';
  const bobPub = 'de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f';
  const shared = '4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742';
  t.equal(toHex(x25519.getPublicKey(alice)), alicePub);
  t.equal(toHex(x25519.getPublicKey(bob)), bobPub);
  t.equal(toHex(x25519.getSharedSecret(alice, fromHex(bobPub))), shared);
  t.equal(toHex(x25519.getSharedSecret(bob, fromHex(alicePub))), shared);
  // A low-order point gives an all-zero secret: refused (the seal code relies on this).
  t.throws(() => x25519.getSharedSecret(alice, new Uint8Array(32)));
});

t.test('HKDF: RFC 5869 A.1 and A.3 (SHA-256), and SHA-384 against node:crypto', async (t) => {
  const ikm = fromHex('0b'.repeat(22));
  t.equal(
    toHex(hkdf(sha256, ikm, fromHex('000102030405060708090a0b0c'), fromHex('f0f1f2f3f4f5f6f7f8f9'), 42)),
    '3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865',
  );
  t.equal(
    toHex(hkdf(sha256, ikm, new Uint8Array(0), new Uint8Array(0), 42)),
    '8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8',
  );
  // The seal combiner's exact shape: empty salt, long IKM, 44 bytes out.
  const longIkm = new Uint8Array(1760).map((_, i) => i * 7);
  const info = enc.encode('coffer-seal-v1 AES-256-GCM key and nonce');
  t.equal(
    toHex(hkdf(nobleSha384, longIkm, new Uint8Array(0), info, 44)),
    toHex(new Uint8Array(hkdfSync('sha384', longIkm, new Uint8Array(0), info, 44))),
  );
});

t.test('ML-DSA-87: C2SP CCTV accumulated vectors, 100 iterations', async (t) => {
  const s = shake128.create({});
  const a = shake128.create({});
  let verified = 0;
  for (let i = 0; i < 100; i++) {
    const seed = s.xof(32);
    const { publicKey, secretKey } = ml_dsa87.keygen(seed);
    a.update(publicKey);
    const sig = ml_dsa87.sign(new Uint8Array(0), secretKey, { extraEntropy: false });
    a.update(sig);
    if (ml_dsa87.verify(sig, new Uint8Array(0), publicKey)) verified++;
  }
  t.equal(verified, 100);
  t.equal(toHex(a.xof(32)), '8c3ad714777622b8f21ce31bb35f71394f23bc0fcf3c78ace5d608990f3b061b');
});

t.test('ML-KEM-1024: Wycheproof mlkem_1024_keygen_seed_test tcId 1 (FIPS 203 final)', async (t) => {
  // The published dk ends with H(ek) || z, so H(ek) pins the whole published ek.
  const seed = fromHex(
    '7c9935a0b07694aa0c6d10e4db6b1add2fd81a25ccb148032dcd739936737f2d8626ed79d451140800e03b59b956f8210e556067407d13dc90fa9e8b872bfb8f',
  );
  const { publicKey, secretKey } = ml_kem1024.keygen(seed);
  t.equal(toHex(publicKey.subarray(0, 16)), '537911957c125148a87f41589cb222d0', 'ek starts as published');
  t.equal(toHex(publicKey.subarray(-6)), '850e0c4847db', 'ek ends as published');
  const hEk = 'ebbe41cd4dea489dedd00e76ae0bcf54aa8550202920eb64d5892ad02b13f2e5';
  t.equal(toHex(sha3_256(publicKey)), hEk, 'H(ek) as published in dk');
  t.equal(
    toHex(secretKey.subarray(-64)),
    `${hEk}8626ed79d451140800e03b59b956f8210e556067407d13dc90fa9e8b872bfb8f`,
  );
  t.equal(toHex(secretKey.subarray(0, 16)), '433a70ee6950f9882acdd5a47820a6a8', 'dk starts as published');
  t.same(secretKey.subarray(1536, 1536 + 1568), publicKey, 'dk embeds ek');
});
