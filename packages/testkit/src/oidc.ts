/**
 * A real OpenID provider (`oidc-provider`) on 127.0.0.1 for sign-in tests, and a scripted browser
 * that goes through its redirect dance: follows redirects by hand, keeps cookies per origin, fills
 * the provider's own login and consent pages. Imported as `@coffer/testkit/oidc` so tests that do
 * not sign in never load the provider.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Provider from 'oidc-provider';

export interface TestOidcAccount {
  email?: string;
  email_verified?: boolean;
  groups?: string[];
  name?: string;
}

export interface TestOidcProviderOptions {
  /** Redirect URIs registered for the client. */
  redirectUris: string[];
  accounts: Record<string, TestOidcAccount>;
  clientId?: string;
  clientSecret?: string;
  /** ID-token lifetime in seconds (default 120). */
  idTokenTtl?: number;
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  server: Server;
  /** The provider's request listener (to serve the same provider from another server). */
  listener: (req: IncomingMessage, res: ServerResponse) => void;
  /** error_detail of every grant error the provider raised (why it refused a code). */
  grantErrors: string[];
  close(): Promise<void>;
}

export const TEST_OIDC_CLIENT_ID = 'coffer-engine';
export const TEST_OIDC_CLIENT_SECRET = 'a-test-client-secret-of-some-length-0123456789';

/** Starts a provider on an ephemeral loopback port with one confidential client and `accounts`. */
export async function startTestOidcProvider(options: TestOidcProviderOptions): Promise<TestOidcProvider> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const issuer = `http://127.0.0.1:${address.port}`;
  const clientId = options.clientId ?? TEST_OIDC_CLIENT_ID;
  const clientSecret = options.clientSecret ?? TEST_OIDC_CLIENT_SECRET;
  const grantErrors: string[] = [];
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: options.redirectUris,
        response_types: ['code'],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    async findAccount(_ctx: unknown, id: string) {
      const account = options.accounts[id];
      if (account === undefined) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account }) };
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'], profile: ['name'] },
    ttl: { IdToken: options.idTokenTtl ?? 120 },
    cookies: { keys: ['oidc-test-cookie-key-0123456789'] },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
  });
  provider.on('grant.error', (_ctx: unknown, err: { error_detail?: string }) => {
    grantErrors.push(err.error_detail ?? 'unknown');
  });
  const listener = provider.callback();
  server.on('request', listener);
  return {
    issuer,
    clientId,
    clientSecret,
    server,
    listener,
    grantErrors,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A scripted browser: manual redirects, a cookie jar per origin, the provider's forms filled in. */
export class TestBrowser {
  readonly jar = new Map<string, Map<string, string>>();

  cookieHeader(url: URL): string {
    const jar = this.jar.get(url.origin);
    return jar === undefined ? '' : [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  keep(url: URL, res: Response): void {
    const jar = this.jar.get(url.origin) ?? new Map<string, string>();
    this.jar.set(url.origin, jar);
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const gone = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=Thu, 01 Jan 1970/i.test(a));
      if (gone || value === '') jar.delete(name);
      else jar.set(name, value);
    }
  }

  async request(
    url: URL,
    init: { method?: string; form?: URLSearchParams; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { cookie: this.cookieHeader(url), ...init.headers };
    if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      headers,
      body: init.form?.toString(),
      redirect: 'manual',
    });
    this.keep(url, res);
    return res;
  }

  /**
   * Opens `start` and goes on like a person: follows every redirect, signs in as `login` on the
   * login page and continues on the consent page, until a redirect points under `stopAt` (never
   * fetched). Returns that URL. With `abort`, takes the provider's abort link instead.
   */
  async signIn(
    start: string,
    login: string,
    stopAt: string,
    options: { abort?: boolean } = {},
  ): Promise<string> {
    let url = new URL(start);
    let res = await this.request(url);
    for (let step = 0; step < 20; step++) {
      if (res.status >= 300 && res.status < 400) {
        const location = res.headers.get('location');
        if (location === null) throw new Error('redirect without location');
        const next = new URL(location, url);
        if (next.href.startsWith(stopAt)) return next.href;
        url = next;
        res = await this.request(url);
        continue;
      }
      const html = await res.text();
      if (res.status !== 200) throw new Error(`provider answered ${res.status}: ${html.slice(0, 300)}`);
      if (options.abort) {
        const abort = /href="([^"]*\/abort)"/.exec(html);
        if (abort === null) throw new Error('no abort link');
        url = new URL(abort[1]!, url);
        res = await this.request(url);
        continue;
      }
      const form = /<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
      if (form === null) throw new Error(`no form on the provider page: ${html.slice(0, 300)}`);
      const body = new URLSearchParams();
      for (const input of form[2]!.matchAll(/<input[^>]*name="([^"]+)"[^>]*>/g)) {
        const name = input[1]!;
        const value = /value="([^"]*)"/.exec(input[0])?.[1] ?? '';
        body.set(name, name === 'login' ? login : name === 'password' ? 'any-password' : value);
      }
      url = new URL(form[1]!.replaceAll('&amp;', '&'), url);
      res = await this.request(url, { method: 'POST', form: body });
    }
    throw new Error('too many steps');
  }
}
