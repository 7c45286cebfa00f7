/**
 * The screens and who sees them. A screen appears only when the engine has the feature and the
 * signed-in role holds its capability (`capability: null` = anyone signed in); a feature the engine
 * lacks is absent, never a dead button.
 */
import type { ComponentType } from 'react';
import { Account } from './screens/account.tsx';
import { Approvals } from './screens/approvals.tsx';
import { Audit } from './screens/audit.tsx';
import { JobDetail, Jobs, NewJob } from './screens/jobs.tsx';
import { Members } from './screens/members.tsx';
import { Overview } from './screens/overview.tsx';
import { Restore } from './screens/restore.tsx';
import { Setup } from './screens/setup.tsx';
import { Support } from './screens/support.tsx';

export interface ScreenRoute {
  path: string;
  title: string;
  component: ComponentType<{ params: Record<string, string | undefined> }>;
  /** Capability needed to see it; `'owner'` for owner-only screens; null for anyone signed in. */
  capability: string | null;
  /** Shown in the navigation (detail screens are not). */
  nav: boolean;
}

export const SCREENS: ScreenRoute[] = [
  { path: '/', title: 'Overview', component: Overview, capability: null, nav: true },
  { path: '/jobs', title: 'Jobs', component: Jobs, capability: 'job.read', nav: true },
  { path: '/jobs/new', title: 'New job', component: NewJob, capability: 'job.write', nav: false },
  { path: '/jobs/:id', title: 'Job', component: JobDetail, capability: 'job.read', nav: false },
  { path: '/restore', title: 'Restore', component: Restore, capability: 'restore.dryrun', nav: true },
  { path: '/approvals', title: 'Approvals', component: Approvals, capability: 'restore.approve', nav: true },
  { path: '/audit', title: 'Audit', component: Audit, capability: 'audit.read', nav: true },
  { path: '/members', title: 'Members', component: Members, capability: 'roles.read', nav: true },
  { path: '/support', title: 'Support', component: Support, capability: 'posture.read', nav: true },
  { path: '/setup', title: 'Set-up', component: Setup, capability: null, nav: true },
  { path: '/account', title: 'Account', component: Account, capability: null, nav: true },
];
