/** A real SecretBox for tests: AES-256-GCM under a random key, so sealed text never shows the plain. */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { SecretBox } from '../../src/index.ts';

export function testBox(): SecretBox & { opened: number } {
  const key = randomBytes(32);
  const box = {
    opened: 0,
    seal(plain: string): string {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', key, iv);
      const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return `sealed:${Buffer.concat([iv, c.getAuthTag(), ct]).toString('base64url')}`;
    },
    open(sealed: string): string {
      box.opened++;
      const b = Buffer.from(sealed.slice('sealed:'.length), 'base64url');
      const d = createDecipheriv('aes-256-gcm', key, b.subarray(0, 12));
      d.setAuthTag(b.subarray(12, 28));
      return Buffer.concat([d.update(b.subarray(28)), d.final()]).toString('utf8');
    },
  };
  return box;
}
