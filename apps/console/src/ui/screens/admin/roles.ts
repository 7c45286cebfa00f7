/** The role table (`GET /admin/roles`) as one cached query, shared by Members and Identity providers. */
import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client.ts';
import type { RolesAnswer } from './types.ts';

export const ROLES_KEY = ['roles'] as const;

export function useRoles() {
  return useQuery({ queryKey: ROLES_KEY, queryFn: () => api.get<RolesAnswer>('/admin/roles') });
}
