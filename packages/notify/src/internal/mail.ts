/**
 * One mail through nodemailer to the SMTP server the deployment names (the transport options are
 * injected; the SMTP host is the deployment's, not a role's choice, so the URL guard does not apply).
 * Failures are reported by code and a fixed message only: nodemailer's messages can quote server
 * replies and addresses.
 */
// nodemailer is loaded with the first mail: about 3 MiB of heap that an engine without an email
// channel need not hold.
import type { createTransport } from 'nodemailer';
import type { MailMessage } from '../payloads.ts';
import { AttemptFailure } from './http.ts';

/** How mail is sent: nodemailer SMTP transport options (or an `smtp:`/`smtps:` URL) and a sender. */
export interface EmailConfig {
  transport: string | Record<string, unknown>;
  from: string;
}

export async function mailOnce(config: EmailConfig, message: MailMessage, timeoutMs: number): Promise<void> {
  const base =
    typeof config.transport === 'string'
      ? { url: config.transport }
      : (config.transport as Record<string, unknown>);
  const { createTransport: create } = await import('nodemailer');
  const transport = create({
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    ...base,
  } as Parameters<typeof createTransport>[0]);
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      transport.sendMail({ from: config.from, to: message.to, subject: message.subject, text: message.text }),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new AttemptFailure('ERR_NOTIFY_TIMEOUT', `no answer within ${timeoutMs} ms`, true)),
          timeoutMs,
        );
      }),
    ]);
  } catch (err) {
    if (err instanceof AttemptFailure) throw err;
    const e = err as { code?: unknown; responseCode?: unknown };
    const code = typeof e.code === 'string' && /^[A-Z0-9_]{1,32}$/.test(e.code) ? e.code : 'EMAIL';
    const reply = typeof e.responseCode === 'number' ? e.responseCode : undefined;
    // 4xx SMTP replies and connection trouble are worth a retry; 5xx replies are final.
    const transient = reply === undefined ? code !== 'EENVELOPE' && code !== 'EAUTH' : reply < 500;
    throw new AttemptFailure(
      'ERR_NOTIFY_EMAIL',
      reply === undefined ? `mail not sent (${code})` : `mail server answered ${reply}`,
      transient,
      reply,
    );
  } finally {
    clearTimeout(timer);
    transport.close();
  }
}
