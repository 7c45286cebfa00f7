// Change tokens (SourceRecordInfo.change): equal at two listings only when the bytes are the same,
// so an incremental run may reference the record without reading it.
import { renameSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { createFilesSource } from '../src/files-source.ts';
import { isSkipped, type SourceRecordInfo } from '../src/types.ts';

async function tokens(root: string): Promise<Map<string, string | undefined>> {
  const src = createFilesSource({ type: 'files', root, binding: 'b' });
  const out = new Map<string, string | undefined>();
  for await (const e of src.enumerate()) if (!isSkipped(e)) out.set(e.name, (e as SourceRecordInfo).change);
  await src.close();
  return out;
}

t.test(
  'files: the token holds across listings and moves with every change, even a disguised one',
  async (t) => {
    const root = tempDir(t, 'coffer-change-');
    writeFileSync(join(root, 'a.txt'), 'alpha');
    writeFileSync(join(root, 'b.txt'), 'bravo');
    const first = await tokens(root);
    t.match(first.get('a.txt'), /^\d+:5:[\d.]+:[\d.]+$/, 'inode, size, mtime, ctime');
    t.same(await tokens(root), first, 'an untouched tree lists the same tokens');

    // Same size, modification time set back to what it was: the change time still moves.
    const before = statSync(join(root, 'a.txt'));
    await new Promise((r) => setTimeout(r, 20));
    writeFileSync(join(root, 'a.txt'), 'ALPHA');
    utimesSync(join(root, 'a.txt'), before.atime, before.mtime);
    const second = await tokens(root);
    t.not(second.get('a.txt'), first.get('a.txt'), 'a rewrite with the old mtime is still seen');
    t.equal(second.get('b.txt'), first.get('b.txt'), 'the other file keeps its token');

    // Replaced by a rename: another inode.
    writeFileSync(join(root, 'b.new'), 'bravo');
    renameSync(join(root, 'b.new'), join(root, 'b.txt'));
    const third = await tokens(root);
    t.not(third.get('b.txt'), second.get('b.txt'), 'a file replaced by a rename is seen');
  },
);
