/**
 * The screens and who sees them. A screen appears only when the engine has the feature and the
 * signed-in role holds its capability (`capability: null` = anyone signed in); a feature the engine
 * lacks is absent, never a dead button. Each screen is its own chunk, loaded when first opened, so
 * the sign-in screen stays small (docs/console.md "Performance").
 */
import { type ComponentType, lazy } from 'react';

type Params = { params: Record<string, string | undefined> };

/** A lazily loaded named export of a screen module. */
function screen<K extends string>(load: () => Promise<Record<K, ComponentType<Params>>>, name: K) {
  return lazy(async () => ({ default: (await load())[name] }));
}

export interface ScreenRoute {
  path: string;
  title: string;
  component: ComponentType<Params>;
  /** Capability needed to see it; `'owner'` for owner-only screens; null for anyone signed in. */
  capability: string | null;
  /** Shown in the navigation (detail screens are not). */
  nav: boolean;
}

export const SCREENS: ScreenRoute[] = [
  {
    path: '/',
    title: 'Overview',
    component: screen(() => import('./screens/overview.tsx'), 'Overview'),
    capability: null,
    nav: true,
  },
  {
    path: '/jobs',
    title: 'Jobs',
    component: screen(() => import('./screens/jobs.tsx'), 'Jobs'),
    capability: 'job.read',
    nav: true,
  },
  {
    path: '/new-job',
    title: 'New job',
    component: screen(() => import('./screens/jobs.tsx'), 'NewJob'),
    capability: 'job.write',
    nav: false,
  },
  {
    path: '/jobs/:id',
    title: 'Job',
    component: screen(() => import('./screens/jobs.tsx'), 'JobDetail'),
    capability: 'job.read',
    nav: false,
  },
  {
    path: '/restore',
    title: 'Restore',
    component: screen(() => import('./screens/restore.tsx'), 'Restore'),
    capability: 'restore.dryrun',
    nav: true,
  },
  {
    path: '/approvals',
    title: 'Approvals',
    component: screen(() => import('./screens/approvals.tsx'), 'Approvals'),
    capability: 'restore.approve',
    nav: true,
  },
  {
    path: '/audit',
    title: 'Audit',
    component: screen(() => import('./screens/audit.tsx'), 'Audit'),
    capability: 'audit.read',
    nav: true,
  },
  {
    path: '/notifications',
    title: 'Notifications',
    component: screen(() => import('./screens/notifications.tsx'), 'Notifications'),
    capability: 'notify.config',
    nav: true,
  },
  {
    path: '/members',
    title: 'Members',
    component: screen(() => import('./screens/members.tsx'), 'Members'),
    capability: 'roles.read',
    nav: true,
  },
  {
    path: '/identity-providers',
    title: 'Identity providers',
    component: screen(() => import('./screens/identity-providers.tsx'), 'IdentityProviders'),
    capability: 'keys.ceremony',
    nav: true,
  },
  {
    path: '/vendor-support',
    title: 'Support',
    component: screen(() => import('./screens/support.tsx'), 'Support'),
    capability: 'posture.read',
    nav: true,
  },
  {
    path: '/updates',
    title: 'Updates',
    component: screen(() => import('./screens/updates.tsx'), 'Updates'),
    // Reads for anyone signed in; the writes (keys.ceremony) are hidden for other roles on the screen.
    capability: null,
    nav: true,
  },
  {
    path: '/control-plane',
    title: 'Control plane',
    component: screen(() => import('./screens/control-plane.tsx'), 'ControlPlane'),
    // Status for anyone signed in; export and import (access.policy) are hidden for other roles.
    capability: null,
    nav: true,
  },
  {
    path: '/configuration',
    title: 'Configuration',
    component: screen(() => import('./screens/configuration.tsx'), 'Configuration'),
    capability: 'posture.read',
    nav: true,
  },
  {
    path: '/posture',
    title: 'Posture',
    component: screen(() => import('./screens/posture.tsx'), 'Posture'),
    capability: 'posture.read',
    nav: true,
  },
  {
    path: '/reports',
    title: 'Reports',
    component: screen(() => import('./screens/reports.tsx'), 'Reports'),
    capability: 'reports.read',
    nav: true,
  },
  {
    path: '/setup',
    title: 'Set-up',
    component: screen(() => import('./screens/setup.tsx'), 'Setup'),
    capability: null,
    nav: true,
  },
  {
    path: '/account',
    title: 'Account',
    component: screen(() => import('./screens/account.tsx'), 'Account'),
    capability: null,
    nav: true,
  },
];
