// Test helpers: run the real CLI in a child process (Node's type stripping runs src/cli.ts).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const APP_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CLI_SRC = join(APP_ROOT, 'src', 'cli.ts');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <entry> ...args` with a clean env (plus `env`), optional stdin; never throws. */
export function runCli(
  args: string[],
  options: { env?: Record<string, string>; input?: string; entry?: string; cwd?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      ...options.env,
    };
    const child = spawn(process.execPath, [options.entry ?? CLI_SRC, ...args], {
      env,
      cwd: options.cwd ?? APP_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** What a command reads and writes: each field given adds its option. */
export interface CliTarget {
  from: string;
  job?: string;
  run?: string;
  key?: string;
  to?: string;
}

/**
 * `<command> --from FROM [--job JOB] [--run RUN] [--key KEY] [--to DIR] ...rest`: the arguments
 * nearly every test passes, built in one place so a test spells out only what it varies (the CLI
 * reads options in any order, so flags in `rest` mean the same after them).
 */
export function cliArgs(command: string, target: CliTarget, ...rest: string[]): string[] {
  const option = (name: string, value: string | undefined) => (value === undefined ? [] : [name, value]);
  return [
    command,
    '--from',
    target.from,
    ...option('--job', target.job),
    ...option('--run', target.run),
    ...option('--key', target.key),
    ...option('--to', target.to),
    ...rest,
  ];
}
