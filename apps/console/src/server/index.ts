export { buildConsole, CONSOLE_CSP, PROXIED_PREFIXES } from './app.ts';
export { type ConsoleConfig, ConsoleConfigError, loadConsoleConfig } from './config.ts';
export { startConsole } from './start.ts';
