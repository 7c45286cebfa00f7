/**
 * The engine's outgoing mail, through nodemailer to the SMTP server the deployment names
 * (ENGINE_SMTP_URL). One use so far: the first-owner set-up link. The transport is built lazily
 * and reused; failures are reported to the caller by code only (nodemailer's messages can quote
 * server replies and addresses), and the SMTP password never reaches a log line.
 */
// nodemailer is loaded with the first message: about 3 MiB of heap that a deployment without
// mail need not hold.
import type { Transporter } from 'nodemailer';
import type { EngineConfig } from '../config.ts';

export interface Mailer {
  /** Sends one plain-text message; resolves false (never throws) when the server refused it. */
  send(message: { to: string; subject: string; text: string }): Promise<{ sent: boolean; code?: string }>;
}

export function createMailer(config: NonNullable<EngineConfig['mail']>): Mailer {
  let transport: Transporter | undefined;
  const url = new URL(config.url);
  return {
    async send(message) {
      const { createTransport } = await import('nodemailer');
      transport ??= createTransport({
        host: url.hostname,
        port: Number(url.port || (url.protocol === 'smtps:' ? 465 : 587)),
        secure: url.protocol === 'smtps:',
        ...(config.username === undefined
          ? {}
          : { auth: { user: config.username, pass: config.password ?? '' } }),
      });
      try {
        await transport.sendMail({ from: config.from, ...message });
        return { sent: true };
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        return { sent: false, code: typeof code === 'string' ? code : 'EMAIL' };
      }
    },
  };
}
