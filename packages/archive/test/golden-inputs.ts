/** The fixed records of the golden fixture (make-golden.ts writes them, golden.test.ts compares). */
import type { RecordInput } from '../src/index.ts';
import { pseudoRandom, text } from './helpers.ts';

export function goldenRecords(run: number): RecordInput[] {
  return [
    {
      name: 'hello.txt',
      body: new TextEncoder().encode(`hello from run ${run}\n`),
      metadata: { contentType: 'text/plain', mode: 420 },
    },
    { name: 'empty', body: new Uint8Array(0), metadata: {} },
    {
      name: 'logs/app.log',
      body: text(40_000, run),
      metadata: { contentType: 'text/plain', mtime: '2024-12-31T23:59:59.000Z' },
    },
    {
      name: 'blob.bin',
      body: pseudoRandom(100_000, run),
      metadata: { contentType: 'application/octet-stream' },
    },
    { name: 'ünïcødé/日本語/😀 file.txt', body: new TextEncoder().encode('grüße\n'), metadata: {} },
    {
      name: 'kv/session:42',
      namespace: 'sessions',
      sourceType: 'redis',
      body: new TextEncoder().encode('{"user":42}'),
      metadata: { expiresAt: '2030-01-01T00:00:00.000Z', ttlSeconds: 3600 },
    },
    { name: 'empty-at-end', body: new Uint8Array(0) },
  ];
}
