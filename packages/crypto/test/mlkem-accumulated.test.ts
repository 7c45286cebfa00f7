// ML-KEM-1024 encapsulation and decapsulation known answers: the C2SP CCTV "accumulated" test
// (keygen, encaps, decaps of a pseudorandom ciphertext, 10 000 iterations from a SHAKE-128 stream),
// with the FIPS 203 final result published in BoringSSL / LibreSSL mlkem_iteration_tests.c
// (kExpectedAdam1024). About 20 s: kept in its own file so tap runs it beside the others.
import { shake128 } from '@noble/hashes/sha3.js';
import { ml_kem1024 } from '@noble/post-quantum/ml-kem.js';
import t from 'tap';
import { toHex } from '../src/internal/bytes.ts';

t.test('ML-KEM-1024 accumulated, 10 000 iterations', async (t) => {
  const rng = shake128.create({});
  const acc = shake128.create({});
  t.equal(
    toHex(shake128(new Uint8Array(0), { dkLen: 16 })),
    '7f9c2ba4e88f827d616045507605853e',
    'RNG stream start',
  );
  for (let i = 0; i < 10000; i++) {
    const { publicKey, secretKey } = ml_kem1024.keygen(rng.xof(64)); // d || z
    acc.update(publicKey);
    acc.update(secretKey);
    const { cipherText, sharedSecret } = ml_kem1024.encapsulate(publicKey, rng.xof(32));
    acc.update(cipherText);
    acc.update(sharedSecret);
    acc.update(ml_kem1024.decapsulate(rng.xof(1568), secretKey)); // implicit rejection
  }
  t.equal(toHex(acc.xof(32)), 'e3bf82b013307b2e9d47dde791ff6dfc82e694e6382404abdb948b908b75bad5');
});
