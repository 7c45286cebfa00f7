import t from 'tap';
import { type RestoreError, validateRestoreRequest } from '../src/index.ts';

const cases: Array<[string, unknown, string]> = [
  ['not an object', 'x', 'request body must be a JSON object'],
  ['array body', [], 'request body must be a JSON object'],
  ['null body', null, 'request body must be a JSON object'],
  ['missing runId', {}, 'runId is required'],
  ['empty runId', { runId: '' }, 'runId is required'],
  ['numeric runId', { runId: 7 }, 'runId must be a string'],
  [
    'path runId',
    { runId: '../x' },
    'runId must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit',
  ],
  ['confirm string', { runId: 'r', confirm: 'yes' }, 'confirm must be a boolean'],
  ['include not array', { runId: 'r', include: 'a/' }, 'include must be an array of non-empty strings'],
  ['include empty entry', { runId: 'r', include: ['a/', ''] }, 'include[1] must be a non-empty string'],
  ['include non-string entry', { runId: 'r', include: [3] }, 'include[0] must be a non-empty string'],
  ['exclude empty entry', { runId: 'r', exclude: [''] }, 'exclude[0] must be a non-empty string'],
  ['exclude non-string entry', { runId: 'r', exclude: ['a', null] }, 'exclude[1] must be a non-empty string'],
  ['maxRecords zero', { runId: 'r', maxRecords: 0 }, 'maxRecords must be a positive integer'],
  ['maxRecords fraction', { runId: 'r', maxRecords: 1.5 }, 'maxRecords must be a positive integer'],
  ['maxRecords string', { runId: 'r', maxRecords: '5' }, 'maxRecords must be a positive integer'],
  ['recordName empty', { runId: 'r', recordName: '' }, 'recordName must be a non-empty string'],
  ['destinationId empty', { runId: 'r', destinationId: '' }, 'destinationId must be a non-empty string'],
  ['unknown onExisting', { runId: 'r', onExisting: 'merge' }, "onExisting must be 'overwrite' or 'skip'"],
  ['target not object', { runId: 'r', target: 'x' }, 'target must be an object'],
  [
    'target unknown key',
    { runId: 'r', target: { path: '/' } },
    'target may only hold binding, namespaceId and bucketName',
  ],
  [
    'target empty binding',
    { runId: 'r', target: { binding: '' } },
    'target.binding must be a non-empty string',
  ],
  ['d1Tables not object', { runId: 'r', d1Tables: [] }, 'd1Tables must be an object'],
  [
    'd1Tables no database',
    { runId: 'r', d1Tables: { tables: ['a'] } },
    'd1Tables.database must be a non-empty string',
  ],
  [
    'd1Tables no tables',
    { runId: 'r', d1Tables: { database: 'd', tables: [] } },
    'd1Tables.tables must be a non-empty array of non-empty strings',
  ],
  [
    'd1Tables empty table',
    { runId: 'r', d1Tables: { database: 'd', tables: ['a', ''] } },
    'd1Tables.tables[1] must be a non-empty string',
  ],
  [
    'd1Tables createOnly',
    { runId: 'r', d1Tables: { database: 'd', tables: ['a'], createOnly: 1 } },
    'd1Tables.createOnly must be a boolean',
  ],
  [
    'd1Tables with recordName',
    { runId: 'r', recordName: 'x', d1Tables: { database: 'd', tables: ['a'] } },
    'd1Tables cannot be combined with recordName',
  ],
  [
    'bad planHash',
    { runId: 'r', planHash: 'sha256:00' },
    'planHash must be sha384:<96 lower-case hex digits>',
  ],
  [
    'cfConfig',
    { runId: 'r', cfConfig: { token: 'tok' } },
    'cfConfig is not supported: this engine has no platform-configuration connector',
  ],
  [
    'mediaRestore',
    { runId: 'r', mediaRestore: { token: 'tok' } },
    'mediaRestore is not supported: this engine has no media connector',
  ],
  ['unknown field', { runId: 'r', dryRun: true }, 'unknown field "dryRun"'],
];

for (const [what, body, message] of cases) {
  t.test(what, async (t) => {
    t.plan(3);
    try {
      validateRestoreRequest(body);
      t.fail('accepted');
    } catch (e) {
      const err = e as RestoreError;
      t.equal(err.code, 'ERR_RESTORE_INVALID_REQUEST');
      t.equal(err.status, 400);
      t.same(err.toJSON(), { error: message });
    }
  });
}

t.test('defaults and normalisation', async (t) => {
  t.same(validateRestoreRequest({ runId: 'run-1' }), {
    runId: 'run-1',
    confirm: false,
    include: [],
    exclude: [],
    onExisting: 'overwrite',
  });
  const full = validateRestoreRequest({
    runId: 'run-1',
    confirm: true,
    target: { binding: 'b', namespaceId: '3', bucketName: null },
    include: ['a/'],
    exclude: ['a/b'],
    maxRecords: 5,
    destinationId: 'default',
    onExisting: 'skip',
    d1Tables: { database: 'db', tables: ['Users'] },
  });
  t.same(full.target, { binding: 'b', namespaceId: '3' });
  t.same(full.d1Tables, { database: 'db', tables: ['Users'], createOnly: false });
  t.equal(full.onExisting, 'skip');
  t.equal(full.confirm, true);
});
