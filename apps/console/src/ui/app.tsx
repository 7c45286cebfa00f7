import { useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense } from 'react';
import { Link, Route, Switch, useLocation } from 'wouter';
import { api } from './api/client.ts';
import { can, useWhoami, WHOAMI_KEY, type Whoami } from './auth/session.tsx';
import { linkFromHash, SignIn } from './auth/sign-in.tsx';
import { StepUpProvider } from './auth/step-up.tsx';
import { ErrorBox, formatTime, Loading } from './components/ui.tsx';
import { SCREENS } from './routes.tsx';

/** `/recover`: control-plane recovery with the bare admin token, reachable with no session (docs/console.md "Control plane"). */
const RecoverPage = lazy(async () => ({
  default: (await import('./screens/control-plane/recovery.tsx')).RecoverPage,
}));

function visible(who: Whoami, capability: string | null): boolean {
  if (capability === null) return true;
  if (capability === 'owner') return who.role === 'owner';
  return can(who, capability);
}

function Shell({ who }: { who: Whoami }) {
  const [location] = useLocation();
  const client = useQueryClient();
  const signOut = async () => {
    try {
      await api.post('/admin/auth/logout', {}, { quiet401: true });
    } finally {
      // Another person may sign in next on this browser: drop every cached answer but who is signed in.
      client.removeQueries({ predicate: (q) => q.queryKey[0] !== WHOAMI_KEY[0] });
      client.setQueryData(WHOAMI_KEY, null);
    }
  };
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">Coffer</span>
        <nav aria-label="Main">
          <ul>
            {SCREENS.filter((s) => s.nav && visible(who, s.capability)).map((s) => (
              <li key={s.path}>
                <Link
                  href={s.path}
                  aria-current={
                    location === s.path || (s.path !== '/' && location.startsWith(`${s.path}/`))
                      ? 'page'
                      : undefined
                  }
                >
                  {s.title}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span title={who.subject ?? undefined}>
            {who.email ?? (who.sessionKind === 'token' ? 'Admin token session' : who.method)} ·{' '}
            <strong>{who.role}</strong>
          </span>
          {who.sessionExpiresAt ? (
            <small className="muted">until {formatTime(who.sessionExpiresAt)}</small>
          ) : null}
          <button type="button" onClick={() => void signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading what="Opening" />}>
          <Switch>
            {SCREENS.filter((s) => visible(who, s.capability)).map((s) => (
              <Route key={s.path} path={s.path}>
                {(params) => <s.component params={params as Record<string, string | undefined>} />}
              </Route>
            ))}
            <Route>
              <section className="page">
                <h1>Not here</h1>
                <p>This screen does not exist or your role cannot see it.</p>
                <Link href="/">Back to the overview</Link>
              </section>
            </Route>
          </Switch>
        </Suspense>
      </main>
    </div>
  );
}

export function App() {
  const { data: who, isPending, error, refetch } = useWhoami();
  if (window.location.pathname === '/recover')
    return (
      <Suspense fallback={<Loading what="Opening" />}>
        <RecoverPage />
      </Suspense>
    );
  if (isPending) return <Loading what="Connecting to the engine" />;
  if (error)
    return (
      <main className="center">
        <ErrorBox error={error} onRetry={() => void refetch()} />
      </main>
    );
  // A link (invite or set-up) opens registration even when someone is signed in on this browser.
  if (!who || linkFromHash(window.location.hash)) return <SignIn />;
  return (
    <StepUpProvider>
      <Shell who={who} />
    </StepUpProvider>
  );
}
