import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The UI builds into dist/ui, served by the console server (src/server/app.ts) under a CSP with
// no inline script: Vite's module preload polyfill is bundled, never inlined.
export default defineConfig({
  root: 'src/ui',
  base: '/',
  plugins: [react()],
  build: {
    outDir: '../../dist/ui',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  server: {
    proxy: {
      '/admin': process.env.CONSOLE_ENGINE_URL ?? 'http://127.0.0.1:8080',
      '/support': process.env.CONSOLE_ENGINE_URL ?? 'http://127.0.0.1:8080',
      '/metrics': process.env.CONSOLE_ENGINE_URL ?? 'http://127.0.0.1:8080',
    },
  },
});
