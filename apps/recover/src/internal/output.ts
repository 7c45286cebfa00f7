/**
 * What the CLI prints, and where. stdout carries results only (human text, or exactly one JSON
 * document with --json) so scripts can capture it; stderr carries notes, the progress bar and the
 * one-line error. Every error is one line: `coffer-recover: <command>: <what failed> [<CODE>]`.
 *
 * Security: every string printed from outside (record names, messages of dependencies) passes
 * through oneLine(), so an archive cannot smuggle terminal escapes or extra lines into the output.
 */
import type { RecoverError } from '../errors.ts';

/** The process streams, passed in so tests and the bundle drive the same code. */
export interface Io {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown; isTTY?: boolean; columns?: number };
  stdin: AsyncIterable<Uint8Array | string>;
  env: Record<string, string | undefined>;
  /** Set by the SIGINT/SIGTERM handler; long loops check it between objects. */
  signal?: AbortSignal;
}

/** Replaces control, format and line-separator characters so text stays on one harmless line. */
export function oneLine(text: string, max = 2000): string {
  const clean = text.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, (c) =>
    c === '\t' ? ' ' : `\\u{${c.codePointAt(0)!.toString(16)}}`,
  );
  return clean.length > max ? `${clean.slice(0, max - 3)}...` : clean;
}

/**
 * A list already serialised item by item (each item's JSON text), printed as a JSON array by
 * `Reporter.result`: a result listing 200,000 records is not held as 200,000 objects as well.
 */
export class RawJsonList {
  readonly items: readonly string[];
  constructor(items: readonly string[]) {
    this.items = items;
  }
  toJSON(): string {
    return RAW_MARK;
  }
}

/** What RawJsonList serialises to in the document, replaced by its items when printed. */
const RAW_MARK = '\u0000raw-json-list\u0000';

export class Reporter {
  readonly io: Io;
  readonly json: boolean;
  readonly command: string;

  constructor(io: Io, json: boolean, command: string) {
    this.io = io;
    this.json = json;
    this.command = command;
  }

  /** Prints the command's result: `doc` as one JSON line with --json, else `lines` as text. */
  result(doc: Record<string, unknown>, lines: string[]): void {
    if (!this.json) {
      for (const line of lines) this.io.stdout.write(`${line}\n`);
      return;
    }
    const text = JSON.stringify({ ok: true, command: this.command, ...doc });
    const raw = Object.values(doc).find((v): v is RawJsonList => v instanceof RawJsonList);
    if (raw === undefined) {
      this.io.stdout.write(`${text}\n`);
      return;
    }
    // The one list given as JSON texts goes where its mark is, written item by item.
    const mark = JSON.stringify(RAW_MARK);
    const at = text.indexOf(mark);
    this.io.stdout.write(`${text.slice(0, at)}[`);
    for (let i = 0; i < raw.items.length; i++)
      this.io.stdout.write(i === 0 ? raw.items[i]! : `,${raw.items[i]}`);
    this.io.stdout.write(`]${text.slice(at + mark.length)}\n`);
  }

  /** A human note on stderr (kept out of stdout so results stay machine-readable). */
  note(line: string): void {
    this.io.stderr.write(`coffer-recover: ${oneLine(line)}\n`);
  }

  /** Reports a failure: one line on stderr, and with --json one error document on stdout. */
  fail(err: RecoverError, extra: Record<string, unknown> = {}): void {
    const line = `coffer-recover: ${this.command}: ${oneLine(err.message)} [${err.code}]`;
    this.io.stderr.write(`${line}\n`);
    if (this.json) {
      const error: Record<string, unknown> = {
        code: err.code,
        exitCode: err.exitCode,
        message: oneLine(err.message),
      };
      if (err.object !== undefined) error.object = oneLine(err.object);
      if (err.causeCode !== undefined) error.causeCode = err.causeCode;
      this.io.stdout.write(`${JSON.stringify({ ok: false, command: this.command, error, ...extra })}\n`);
    }
  }
}
