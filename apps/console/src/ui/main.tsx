import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { ApiError } from './api/errors.ts';
import { App } from './app.tsx';
import './styles.css';

const client = new QueryClient({
  defaultOptions: {
    queries: {
      // Engine refusals are answers, not flukes: retry only network failures and 5xx, twice.
      retry: (count, err) => count < 2 && (!(err instanceof ApiError) || err.status >= 500),
      refetchOnWindowFocus: true,
    },
  },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={client}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
