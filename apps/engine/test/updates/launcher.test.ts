// The launcher's choice (src/launcher.ts) and the release unpacker (src/updates/release-artefact.ts)
// on real directories and real tarballs.
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { create as createTar } from 'tar';
import {
  clearBootMark,
  currentRelease,
  decideLaunch,
  LAUNCHER_ENV,
  launchEnv,
  MAX_BOOT_ATTEMPTS,
} from '../../src/launcher.ts';
import { unpackEngineRelease } from '../../src/updates/release-artefact.ts';

function installRelease(dataDir: string, version: string, withMain = true): void {
  const dir = join(dataDir, 'releases', version, 'engine');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dataDir, 'releases', version, 'release.json'), '{}');
  if (withMain) writeFileSync(join(dir, 'main.js'), '// engine\n');
}

function point(dataDir: string, version: string): void {
  symlinkSync(join('releases', version), join(dataDir, 'current'));
}

t.test('no pointer, or a pointer at this version: run this build', async (t) => {
  const dataDir = tempDir(t);
  t.same(decideLaunch({ ENGINE_DATA_DIR: dataDir }, '1.0.0'), { run: 'self' });
  installRelease(dataDir, '1.0.0');
  point(dataDir, '1.0.0');
  t.equal(currentRelease(dataDir), '1.0.0');
  t.same(decideLaunch({ ENGINE_DATA_DIR: dataDir }, '1.0.0'), { run: 'self' });
});

t.test('a pointer at another release: enter it, counting boot attempts', async (t) => {
  const dataDir = tempDir(t);
  installRelease(dataDir, '1.1.0');
  point(dataDir, '1.1.0');
  const env = { ENGINE_DATA_DIR: dataDir };
  for (let i = 1; i <= MAX_BOOT_ATTEMPTS; i++) {
    const d = decideLaunch(env, '1.0.0');
    t.same(d, {
      run: 'release',
      version: '1.1.0',
      script: join(dataDir, 'releases', '1.1.0', 'engine', 'main.js'),
    });
    t.same(JSON.parse(readFileSync(join(dataDir, 'current.boot'), 'utf8')), {
      version: '1.1.0',
      attempts: i,
    });
  }
  t.same(
    decideLaunch(env, '1.0.0'),
    { run: 'self', skipped: '1.1.0', reason: 'boot-attempts' },
    'a release that never started is not entered again',
  );
  clearBootMark(dataDir);
  t.equal(decideLaunch(env, '1.0.0').run, 'release', 'a release that listened once is entered again');
});

t.test('a pointer at a release without its program: run this build', async (t) => {
  const dataDir = tempDir(t);
  installRelease(dataDir, '1.1.0', false);
  point(dataDir, '1.1.0');
  t.same(decideLaunch({ ENGINE_DATA_DIR: dataDir }, '1.0.0'), {
    run: 'self',
    skipped: '1.1.0',
    reason: 'missing',
  });
});

t.test('a pointer that is not a release name is ignored', async (t) => {
  const dataDir = tempDir(t);
  symlinkSync('/etc', join(dataDir, 'current'));
  t.equal(currentRelease(dataDir), null);
  t.same(decideLaunch({ ENGINE_DATA_DIR: dataDir }, '1.0.0'), { run: 'self' });
});

t.test('the launcher fixes its own script and version once and carries them', async (t) => {
  const first = launchEnv({ A: '1' }, '1.0.0', '/opt/coffer/main.js', '1.1.0');
  t.equal(first[LAUNCHER_ENV.script], '/opt/coffer/main.js');
  t.equal(first[LAUNCHER_ENV.baseVersion], '1.0.0');
  t.equal(first[LAUNCHER_ENV.release], '1.1.0');
  t.equal(first.A, '1');
  const again = launchEnv(first, '1.1.0', '/data/releases/1.1.0/engine/main.js', null);
  t.equal(again[LAUNCHER_ENV.script], '/opt/coffer/main.js', 'the installed launcher stays the way back');
  t.equal(again[LAUNCHER_ENV.baseVersion], '1.0.0');
  t.notOk(LAUNCHER_ENV.release in again);
});

async function tarball(tt: Test, build: (dir: string) => void) {
  const src = tempDir(tt);
  build(src);
  const file = join(tempDir(tt), 'a.tgz');
  await createTar({ gzip: true, file, cwd: src, portable: true }, readdirSync(src));
  return file;
}

t.test('unpack: a release tarball with engine/main.js', async (t) => {
  const file = await tarball(t, (d) => {
    mkdirSync(join(d, 'engine'));
    writeFileSync(join(d, 'engine', 'main.js'), '// engine\n');
  });
  const out = tempDir(t);
  await unpackEngineRelease(file, out);
  t.equal(readFileSync(join(out, 'engine', 'main.js'), 'utf8'), '// engine\n');
});

t.test('unpack refuses: no program, a link, not a tarball', async (t) => {
  const noMain = await tarball(t, (d) => writeFileSync(join(d, 'README'), 'x'));
  await t.rejects(unpackEngineRelease(noMain, tempDir(t)), {
    code: 'ERR_UPDATE_UPLOAD',
    message: /no engine\/main\.js/,
  });
  const link = await tarball(t, (d) => {
    mkdirSync(join(d, 'engine'));
    writeFileSync(join(d, 'engine', 'main.js'), '// engine\n');
    symlinkSync('/etc/passwd', join(d, 'engine', 'passwd'));
  });
  const out = tempDir(t);
  await t.rejects(unpackEngineRelease(link, out), {
    code: 'ERR_UPDATE_UPLOAD',
    message: /not a file or a directory/,
  });
  const junk = join(tempDir(t), 'junk.tgz');
  writeFileSync(junk, 'not a tarball at all');
  await t.rejects(unpackEngineRelease(junk, tempDir(t)), { code: 'ERR_UPDATE_UPLOAD' });
});
