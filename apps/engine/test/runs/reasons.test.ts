import { ArchiveError } from '@coffer/archive';
import { ObjectStoreError } from '@coffer/objectstore';
import { SourceError } from '@coffer/sources';
import { StateError } from '@coffer/state';
import t from 'tap';
import {
  causeDigest,
  classifyFailure,
  FAILURE_REASONS,
  isFailureReason,
  RunError,
} from '../../src/runs/reasons.ts';

const store = (code: ConstructorParameters<typeof ObjectStoreError>[0], storeCode?: string) =>
  new ObjectStoreError(code, 'store said no', storeCode ? { storeCode } : {});
const viaWriter = (e: ObjectStoreError) =>
  new ArchiveError('ERR_ARCHIVE_DESTINATION', {
    storeErrorCode: e.code,
    ...(e.storeCode ? { storeCode: e.storeCode } : {}),
    cause: e,
  });
const source = (code: ConstructorParameters<typeof SourceError>[0]) =>
  new SourceError(code, 'source said no');
const viaBody = (e: SourceError) => new ArchiveError('ERR_ARCHIVE_SOURCE_READ', { cause: e });

// Every reason that can arise in this engine, with the real error that raises it.
const TABLE: [string, unknown, string][] = [
  ['destination access error', store('ERR_OBJECTSTORE_ACCESS_DENIED', 'AccessDenied'), 'fail'],
  ['destination access error', viaWriter(store('ERR_OBJECTSTORE_ACCESS_DENIED')), 'fail'],
  ['destination access error', viaWriter(store('ERR_OBJECTSTORE_FAULT')), 'fail'],
  ['destination access error', new RunError('ERR_RUN_DESTINATION_UNKNOWN', 'x'), 'fail'],
  [
    'destination access error',
    new RunError('ERR_RUN_VERIFY_FAILED', 'x', { verifyCode: 'ERR_ARCHIVE_NOT_FOUND' }),
    'fail',
  ],
  [
    'destination rejected the write (NoSuchBucket)',
    store('ERR_OBJECTSTORE_REJECTED', 'NoSuchBucket'),
    'fail',
  ],
  [
    'destination rejected the write (EntityTooLarge)',
    viaWriter(store('ERR_OBJECTSTORE_REJECTED', 'EntityTooLarge')),
    'fail',
  ],
  [
    'destination rejected the write (unknown)',
    store('ERR_OBJECTSTORE_REJECTED', 'has spaces <script>'),
    'fail',
  ],
  ['runlog write contended', new StateError('ERR_STATE_CONFLICT', 'busy'), 'fail'],
  ['runlog write contended', new StateError('ERR_STATE_UNAVAILABLE', 'busy'), 'fail'],
  [
    'shard enumeration incomplete (refused to sign a truncated archive)',
    new ArchiveError('ERR_ARCHIVE_TRUNCATED'),
    'fail',
  ],
  [
    'checkpoint unwrap failed (resume state unreadable; signer may have rotated)',
    new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE'),
    'fail',
  ],
  [
    'seal DO handoff refused (invalid-payload)',
    new RunError('ERR_RUN_HANDOFF', 'x', { handoffClass: 'invalid-payload' }),
    'fail',
  ],
  [
    'seal DO handoff refused (worker-spawn-refused)',
    new RunError('ERR_RUN_HANDOFF', 'x', { handoffClass: 'worker-spawn-refused' }),
    'fail',
  ],
  [
    'seal DO handoff refused (do-error)',
    new RunError('ERR_RUN_HANDOFF', 'x', { handoffClass: 'do-error' }),
    'fail',
  ],
  [
    'seal DO handoff refused (unreachable)',
    new RunError('ERR_RUN_HANDOFF', 'x', { handoffClass: 'unreachable' }),
    'fail',
  ],
  ['seal DO handoff refused', new RunError('ERR_RUN_HANDOFF', 'x'), 'fail'],
  ['internal invariant violated', new ArchiveError('ERR_ARCHIVE_INTERNAL'), 'fail'],
  ['internal invariant violated', new StateError('ERR_STATE_INVARIANT', 'x'), 'fail'],
  ['internal invariant violated', store('ERR_OBJECTSTORE_INVALID_KEY'), 'fail'],
  [
    'shard id overflow (refused to seal a misordered archive)',
    new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW'),
    'fail',
  ],
  [
    'resume state divergent (mid-record resume refused)',
    new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT'),
    'fail',
  ],
  [
    'resume state divergent (mid-record resume refused)',
    new RunError('ERR_RUN_RESUME_DIVERGENT', 'x'),
    'fail',
  ],
  ['source cannot range-read (chunked capture unavailable)', source('ERR_SOURCE_RANGE_UNSUPPORTED'), 'fail'],
  [
    'record over the in-band size ceiling (recover it out of band)',
    viaBody(source('ERR_SOURCE_RECORD_TOO_LARGE')),
    'fail',
  ],
  ['unsupported source type', source('ERR_SOURCE_UNSUPPORTED_TYPE'), 'fail'],
  ['source resource missing', source('ERR_SOURCE_RESOURCE_MISSING'), 'fail'],
  ['source binding error', source('ERR_SOURCE_BINDING'), 'fail'],
  ['source binding error', source('ERR_SOURCE_INVALID_CONFIG'), 'fail'],
  ['source read error', source('ERR_SOURCE_READ'), 'fail'],
  ['source read error', viaBody(source('ERR_SOURCE_READ')), 'fail'],
  ['source read error', new ArchiveError('ERR_ARCHIVE_SOURCE_READ', { cause: new Error('EIO') }), 'fail'],
  [
    'source listing exceeded the page cap (too many items to enumerate in one run; narrow the source selector)',
    source('ERR_SOURCE_LISTING_OVER_CAP'),
    'fail',
  ],
  ['engine not fully configured', new RunError('ERR_RUN_NOT_CONFIGURED', 'x'), 'fail'],
  ['run failed', new Error('something nobody expected'), 'fail'],
  ['run failed', 'not even an error', 'fail'],
];

t.test('every reason that can arise, from its real error', async (t) => {
  for (const [reason, error, disposition] of TABLE) {
    const c = classifyFailure(error);
    t.equal(c.reason, reason, reason);
    t.equal(c.disposition, disposition, `${reason}: ${disposition}`);
    t.ok(isFailureReason(c.reason), `${c.reason} is in the closed list`);
    t.match(c.causeDigest, /^[0-9a-f]{12}$/);
  }
});

t.test('the closed list has 21 entries in the specification order', async (t) => {
  t.equal(FAILURE_REASONS.length, 21);
  t.equal(FAILURE_REASONS[0], 'destination access error');
  t.equal(FAILURE_REASONS[19], 'engine not fully configured');
  t.equal(FAILURE_REASONS[20], 'run failed');
  t.notOk(isFailureReason('destination rejected the write (<code>)'));
  t.notOk(isFailureReason('something else'));
});

t.test('first matching branch wins along the cause chain', async (t) => {
  // A source read error caused by a too-large record: the earlier branch (size ceiling) wins.
  const e = new ArchiveError('ERR_ARCHIVE_SOURCE_READ', { cause: source('ERR_SOURCE_RECORD_TOO_LARGE') });
  t.equal(classifyFailure(e).reason, 'record over the in-band size ceiling (recover it out of band)');
  // A destination access error beats everything after it.
  const both = new RunError('ERR_RUN_NOT_CONFIGURED', 'x', { cause: store('ERR_OBJECTSTORE_ACCESS_DENIED') });
  t.equal(classifyFailure(both).reason, 'destination access error');
});

t.test('throttles park, vanished and skipped records warn', async (t) => {
  t.equal(classifyFailure(store('ERR_OBJECTSTORE_THROTTLED', 'SlowDown')).disposition, 'park');
  t.equal(classifyFailure(viaWriter(store('ERR_OBJECTSTORE_THROTTLED', 'SlowDown'))).disposition, 'park');
  t.equal(classifyFailure(source('ERR_SOURCE_THROTTLED')).disposition, 'park');
  t.equal(classifyFailure(viaBody(source('ERR_SOURCE_THROTTLED'))).disposition, 'park');
  t.equal(classifyFailure(source('ERR_SOURCE_RECORD_VANISHED')).disposition, 'warn');
  t.equal(classifyFailure(viaBody(source('ERR_SOURCE_RECORD_SKIPPED'))).disposition, 'warn');
});

t.test('cause digests are one-way, stable, and never carry the message', async (t) => {
  const secret = 'MARKER-SECRET-5f3a9c';
  const e = new Error(`failed with ${secret}`);
  const d = causeDigest(e);
  t.equal(d, causeDigest(new Error(`failed with ${secret}`)), 'stable');
  t.not(d, causeDigest(new Error('failed with something else')), 'distinguishes');
  const c = classifyFailure(e);
  t.notOk(JSON.stringify(c).includes(secret), 'no marker in the classification');
});

t.test('docs/errors.md lists every run error code in the engine section', async (t) => {
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { repoRoot } = await import('@coffer/testkit');
  const { RUN_ERROR_CODES } = await import('../../src/runs/reasons.ts');
  const doc = readFileSync(join(repoRoot(), 'docs', 'errors.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## engine (apps/engine)'));
  for (const code of RUN_ERROR_CODES) t.match(section, `\`${code}\``, `${code} documented`);
});
