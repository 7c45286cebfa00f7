/** What a run writer is configured with (options checked, keys derived, data key drawn). */
import type { ObjectStore } from '@coffer/objectstore';
import type { ArchiveSource, ArchiveWriterOptions, ManifestRecipient } from '../types.ts';
import type { FrameCodec } from './codec-pool.ts';

export interface WriterConfig {
  store: ObjectStore;
  job: string;
  runId: string;
  prevRunId: string | null;
  source: ArchiveSource;
  startedAt: string;
  shardSize: number;
  compress: boolean;
  maxShards: number;
  dataKey: Uint8Array;
  recipients: ManifestRecipient[];
  signerSecretKey: Uint8Array;
  signerPublicKey: Uint8Array;
  operationalPublicKey: Uint8Array;
  onShard: ArchiveWriterOptions['onShard'];
  beforeCommit: ArchiveWriterOptions['beforeCommit'];
  writeRecovery: boolean;
  now: () => Date;
  codec: FrameCodec;
}
