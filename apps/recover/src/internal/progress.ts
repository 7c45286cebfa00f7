/**
 * A one-line progress bar on stderr for long work (verify, extract), drawn only when stderr is a
 * terminal, --json is off and --no-progress is absent; otherwise every call is a no-op, so piped
 * and scripted runs get nothing extra. Redrawn at most ten times a second; cleared when done.
 */
import type { Io } from './output.ts';

const REDRAW_MS = 100;

function mib(n: number): string {
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

export class Progress {
  private readonly stream: Io['stderr'];
  private readonly label: string;
  readonly enabled: boolean;
  private readonly started = Date.now();
  private last = 0;
  private drawn = false;

  constructor(stream: Io['stderr'], label: string, enabled: boolean) {
    this.stream = stream;
    this.label = label;
    this.enabled = enabled;
  }

  /** Records progress: `done` of `total` bytes, with an optional short note ("shard 3/9"). */
  update(done: number, total: number, note = ''): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < REDRAW_MS && done < total) return;
    this.last = now;
    const cols = this.columns();
    const ratio = total > 0 ? Math.min(1, done / total) : 1;
    const secs = Math.max(0.001, (now - this.started) / 1000);
    const tail = ` ${String(Math.floor(ratio * 100)).padStart(3)}%  ${mib(done)} / ${mib(total)}  ${mib(done / secs)}/s${note ? `  ${note}` : ''}`;
    const width = cols - this.label.length - tail.length - 4;
    let line: string;
    if (width >= 10) {
      const fill = Math.round(ratio * width);
      const bar = `${'='.repeat(fill)}${fill < width ? '>' : ''}${' '.repeat(Math.max(0, width - fill - 1))}`;
      line = `${this.label} [${bar}]${tail}`;
    } else {
      line = `${this.label}${tail}`;
    }
    // Never wider than the terminal, or the line would wrap and \r could not redraw it.
    this.stream.write(`\r${line.slice(0, cols - 1)}`);
    this.drawn = true;
  }

  /** Terminal width (a pty may report 0: then 80), kept within 40..200. */
  private columns(): number {
    const c = this.stream.columns;
    return Math.max(40, Math.min(c !== undefined && c > 0 ? c : 80, 200));
  }

  /** Clears the bar so the result (or the error line) starts on a clean line. */
  done(): void {
    if (!this.enabled || !this.drawn) return;
    const cols = this.columns();
    this.stream.write(`\r${' '.repeat(cols - 1)}\r`);
    this.drawn = false;
  }
}

/** A progress bar for `label`, enabled only on a terminal without --json / --no-progress. */
export function progressFor(io: Io, label: string, options: { json: boolean; progress: boolean }): Progress {
  return new Progress(io.stderr, label, options.progress && !options.json && io.stderr.isTTY === true);
}
