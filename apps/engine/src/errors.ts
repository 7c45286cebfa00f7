/**
 * Typed errors of the engine. Every one carries a stable `code` (listed in docs/errors.md under
 * "engine (apps/engine)"); the HTTP error handler and main.ts switch on it. Messages name the
 * configuration variable or the failing step, never a value that could be a secret.
 */
export type EngineErrorCode =
  | 'ERR_ENGINE_CONFIG'
  | 'ERR_ENGINE_KEYS'
  | 'ERR_ENGINE_KEYS_EXIST'
  | 'ERR_ENGINE_USAGE'
  | 'ERR_ENGINE_DATA_DIR'
  | 'ERR_ENGINE_STATE_UNAVAILABLE'
  | 'ERR_ENGINE_PERIMETER_KEYS';

export const ENGINE_ERROR_CODES: readonly EngineErrorCode[] = [
  'ERR_ENGINE_CONFIG',
  'ERR_ENGINE_KEYS',
  'ERR_ENGINE_KEYS_EXIST',
  'ERR_ENGINE_USAGE',
  'ERR_ENGINE_DATA_DIR',
  'ERR_ENGINE_STATE_UNAVAILABLE',
  'ERR_ENGINE_PERIMETER_KEYS',
];

export class EngineError extends Error {
  readonly code: EngineErrorCode;
  constructor(code: EngineErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineError';
    this.code = code;
  }
}

/** Bad configuration: `variable` names the environment variable; the message is one line. */
export class ConfigError extends EngineError {
  readonly variable: string;
  constructor(variable: string, reason: string, options?: { cause?: unknown }) {
    super('ERR_ENGINE_CONFIG', `${variable}: ${reason}`, options);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}
