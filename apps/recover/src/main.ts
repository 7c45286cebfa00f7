/**
 * The `coffer-recover` program: parses the command line, runs one command, prints its result and
 * returns the process exit code (see exit-codes.ts and README.md "Exit codes").
 *
 * Security: a failure is reported as one line naming the object and what failed, never with key
 * material, credentials or record bytes (see internal/translate.ts); the break-glass secret key is
 * read from a file or stdin only, never from argv or the environment.
 */
import { readFileSync } from 'node:fs';
import * as zlib from 'node:zlib';
import { RecoverError } from './errors.ts';
import { EXIT } from './exit-codes.ts';
import { type ParsedCommand, parseCommandLine, wantsJson } from './internal/args.ts';
import { helpText } from './internal/help.ts';
import { keygen } from './internal/keygen.ts';
import { type Io, Reporter } from './internal/output.ts';
import { toRecoverError } from './internal/translate.ts';

/** The package version; the bundle has it compiled in (scripts/bundle.mjs), dist reads package.json. */
export function version(): string {
  const baked = process.env.COFFER_RECOVER_BUNDLE_VERSION;
  if (baked) return baked;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Runs `coffer-recover` with `argv` (without node and script paths). Returns the exit code; never
 * throws for an expected failure (it is printed instead).
 */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  // The two document commands (control-plane export, signed report) parse their own options and
  // touch no archive; they live in their own files.
  if (argv[0] === 'open-export') return (await import('./open-export.ts')).openExport(argv, io);
  if (argv[0] === 'verify-report') return (await import('./verify-report.ts')).verifyReport(argv, io);
  let command: ParsedCommand;
  try {
    command = parseCommandLine(argv);
  } catch (e) {
    const err = toRecoverError(e);
    new Reporter(io, wantsJson(argv), 'usage').fail(err);
    return err.exitCode;
  }
  const report = new Reporter(io, command.json, command.name);
  try {
    return await dispatch(command, report, io);
  } catch (e) {
    const err = toRecoverError(e);
    report.fail(err);
    return err.exitCode;
  }
}

/**
 * Archives compress shards and the index with zstd, which node:zlib has from Node 22.15 / 23.8 on.
 * Without it a compressed shard cannot be opened, and the archive reader would report it as
 * damaged; say what is really wrong instead, before touching the archive.
 */
export function assertRuntime(): void {
  if (typeof (zlib as { zstdDecompressSync?: unknown }).zstdDecompressSync !== 'function') {
    throw new RecoverError(
      'ERR_RECOVER_RUNTIME',
      `this Node.js (${process.version}) has no zstd in node:zlib; reading archives needs Node 22.15+ (or 23.8+)`,
    );
  }
}

async function dispatch(command: ParsedCommand, report: Reporter, io: Io): Promise<number> {
  switch (command.name) {
    case 'help':
      if (command.json) report.result({ text: helpText(command.topic) }, []);
      else io.stdout.write(helpText(command.topic));
      return EXIT.OK;
    case 'version':
      report.result({ version: version() }, [`coffer-recover ${version()}`]);
      return EXIT.OK;
    case 'keygen':
      return keygen(command.out, report);
    case 'bundle': {
      const { bundleOpen } = await import('./internal/bundle-open.ts');
      return bundleOpen(command, report, io);
    }
    case 'inspect': {
      if (command.key !== undefined) assertRuntime();
      const { inspect } = await import('./internal/inspect.ts');
      return inspect(command, report, io);
    }
    case 'verify': {
      if (command.key !== undefined) assertRuntime();
      const { verifyRun } = await import('./internal/verify.ts');
      return verifyRun(command, report, io);
    }
    case 'extract': {
      assertRuntime();
      const { extract } = await import('./internal/extract.ts');
      return extract(command, report, io);
    }
  }
  throw new RecoverError('ERR_RECOVER_USAGE', 'unknown command');
}
