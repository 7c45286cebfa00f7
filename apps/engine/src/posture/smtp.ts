/**
 * The SMTP reachability probe of the preflight: connect (TLS from the first byte for `smtps:`),
 * read the 220 greeting, send `EHLO`, read the final 250 line, send `QUIT`. No authentication, no
 * mail: the credentials are never sent. A short timeout; errors become fixed codes.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export interface SmtpProbeResult {
  ok: boolean;
  host: string;
  port: number;
  tls: boolean;
  /** The greeting's reply code (220 expected), null when none arrived. */
  greeting: number | null;
  /** The EHLO reply code (250 expected), null when none arrived. */
  ehlo: number | null;
  /** Whether EHLO advertised STARTTLS. */
  starttls: boolean;
  /** A fixed code when not ok: timeout, refused, tls, closed, bad-greeting, bad-ehlo, or the socket's error code. */
  code: string | null;
}

const MAX_REPLY_BYTES = 16 * 1024;

export function smtpTarget(url: string): { host: string; port: number; tls: boolean } {
  const u = new URL(url);
  const tls = u.protocol === 'smtps:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || (tls ? 465 : 587)), tls };
}

export function probeSmtp(url: string, timeoutMs: number): Promise<SmtpProbeResult> {
  const { host, port, tls } = smtpTarget(url);
  const result: SmtpProbeResult = {
    ok: false,
    host,
    port,
    tls,
    greeting: null,
    ehlo: null,
    starttls: false,
    code: null,
  };
  return new Promise((resolve) => {
    let done = false;
    let buffer = '';
    let phase: 'greeting' | 'ehlo' | 'quit' = 'greeting';
    const socket: Socket = tls
      ? tlsConnect({ host, port, servername: /^[\d.:]+$/.test(host) ? undefined : host })
      : netConnect({ host, port });
    const finish = (code: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      result.code = code;
      result.ok = code === null;
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.setEncoding('latin1');
    socket.on('error', (e: NodeJS.ErrnoException) => {
      const c = e.code ?? 'error';
      finish(c === 'ECONNREFUSED' ? 'refused' : /CERT|SSL|TLS/i.test(c) ? 'tls' : c);
    });
    socket.on('close', () => finish(phase === 'quit' ? null : 'closed'));
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      if (buffer.length > MAX_REPLY_BYTES) return finish('oversize-reply');
      // A reply is complete at a line "NNN " (no hyphen after the code).
      const lines = buffer.split('\r\n');
      const last = lines.slice(0, -1).find((l) => /^\d{3}( |$)/.test(l));
      if (last === undefined) return;
      const code = Number(last.slice(0, 3));
      const text = buffer;
      buffer = '';
      if (phase === 'greeting') {
        result.greeting = code;
        if (code !== 220) return finish('bad-greeting');
        phase = 'ehlo';
        socket.write('EHLO coffer-preflight\r\n');
      } else if (phase === 'ehlo') {
        result.ehlo = code;
        result.starttls = /^250[- ]STARTTLS\b/im.test(text);
        if (code !== 250) return finish('bad-ehlo');
        phase = 'quit';
        socket.write('QUIT\r\n');
        // The probe's facts are in; a server that lingers after QUIT is not a failure.
        setTimeout(() => finish(null), 200).unref();
      }
    });
  });
}
