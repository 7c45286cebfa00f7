/**
 * Who is signed in: `GET /admin/whoami` through TanStack Query. The CSRF token it returns is
 * handed to the API client; a 401 anywhere clears this query so the sign-in screen appears.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { ApiError, api, setCsrfToken, setSignedOutHandler } from '../api/client.ts';

export interface Whoami {
  method: string;
  email: string | null;
  subject: string | null;
  role: string;
  roleSource: string;
  capabilities: string[];
  sessionExpiresAt: string | null;
  sessionKind?: string;
  csrfToken?: string;
}

export const WHOAMI_KEY = ['whoami'] as const;

export function useWhoami() {
  const client = useQueryClient();
  useEffect(() => {
    setSignedOutHandler(() => client.setQueryData(WHOAMI_KEY, null));
    return () => setSignedOutHandler(undefined);
  }, [client]);
  return useQuery({
    queryKey: WHOAMI_KEY,
    queryFn: async (): Promise<Whoami | null> => {
      try {
        const who = await api.get<Whoami>('/admin/whoami', { quiet401: true });
        setCsrfToken(who.csrfToken);
        return who;
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) {
          setCsrfToken(undefined);
          return null;
        }
        throw err;
      }
    },
    staleTime: 30_000,
  });
}

/** True when the signed-in caller holds `capability`. */
export function can(who: Whoami | null | undefined, capability: string): boolean {
  return !!who && who.capabilities.includes(capability);
}

export function isOwner(who: Whoami | null | undefined): boolean {
  return who?.role === 'owner';
}

export function useSignedIn(): Whoami {
  const { data } = useWhoami();
  if (!data) throw new Error('useSignedIn outside the signed-in screens');
  return data;
}
