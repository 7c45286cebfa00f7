/**
 * Real receivers on loopback: an HTTPS server with the test CA's certificate that records every
 * request exactly as it arrived, and an SMTP listener (smtp-server) that records every message.
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { SMTPServer } from 'smtp-server';
import type { TestPki } from './pki.ts';

export interface SeenRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  remoteAddress: string;
  servername: string | false;
  at: number;
}

export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  port: number;
  seen: SeenRequest[];
  connections: number;
  answer: (req: SeenRequest, index: number) => Answer;
  close(): Promise<void>;
}

export async function startReceiver(
  pki: TestPki,
  answer: Receiver['answer'] = () => ({ status: 202, body: '{"status":"success"}' }),
): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const r: Receiver = {
    port: 0,
    seen: [],
    connections: 0,
    answer,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server: Server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: SeenRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        remoteAddress: req.socket.remoteAddress ?? '',
        servername: (req.socket as TLSSocket).servername ?? false,
        at: Date.now(),
      };
      const a = r.answer(seen, r.seen.length);
      r.seen.push(seen);
      if (a === 'hang') return;
      res.writeHead(a.status, a.headers ?? { 'content-type': 'application/json' });
      res.end(a.body ?? '');
    });
  });
  server.on('secureConnection', () => r.connections++);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  r.port = (server.address() as AddressInfo).port;
  return r;
}

export interface SeenMail {
  from: string;
  to: string[];
  raw: string;
}

export interface SmtpListener {
  port: number;
  inbox: SeenMail[];
  /** When set, the next messages are refused with this SMTP reply code. */
  refuseWith: number | undefined;
  close(): Promise<void>;
}

export async function startSmtp(): Promise<SmtpListener> {
  const l: SmtpListener = {
    port: 0,
    inbox: [],
    refuseWith: undefined,
    close: () => new Promise<void>((res) => server.close(() => res())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (l.refuseWith !== undefined) {
          const err = Object.assign(new Error('refused'), { responseCode: l.refuseWith });
          callback(err);
          return;
        }
        l.inbox.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((x) => x.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        callback();
      });
    },
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  l.port = (server.server.address() as AddressInfo).port;
  return l;
}

/** A resolver hook: every listed name answers with the given address (default 127.0.0.1). */
export function hookResolver(map: Record<string, string>, calls: string[] = []) {
  return async (hostname: string) => {
    calls.push(hostname);
    const address = map[hostname];
    if (address === undefined) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? (6 as const) : (4 as const) }];
  };
}
