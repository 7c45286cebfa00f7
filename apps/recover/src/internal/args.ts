/**
 * Command-line parsing for `coffer-recover`.
 *
 * Built on node:util parseArgs rather than commander: it ships with Node (the air-gapped bundle
 * carries no argument-parsing dependency and one party fewer touches a tool that reads the
 * break-glass key), its strict mode rejects unknown options and stray arguments, and it supports
 * repeated options (`--include A --include B`). Help text is written by hand either way.
 *
 * Security: credentials are never accepted on the command line (they would land in shell history
 * and `ps`); an option that looks like one is refused with a pointer to the environment variables.
 * Usage messages never echo a stray argument's value (a pasted key must not be printed back).
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { RecoverError } from '../errors.ts';

export interface StoreOptions {
  /** A local directory (a copy of the bucket under the destination prefix) or `s3://bucket/prefix`. */
  from: string;
  endpoint: string | undefined;
  region: string | undefined;
  pathStyle: boolean;
}

export interface GlobalOptions {
  json: boolean;
  /** False with --no-progress; a bar is drawn only when also stderr is a terminal and --json is off. */
  progress: boolean;
}

export type Command =
  | { name: 'help'; topic: string | undefined }
  | { name: 'version' }
  | { name: 'keygen'; out: string }
  | { name: 'bundle'; file: string; key: string | undefined; pinSigner: string | undefined }
  | {
      name: 'inspect';
      store: StoreOptions;
      job: string | undefined;
      run: string | undefined;
      key: string | undefined;
      pinSigner: string | undefined;
    }
  | {
      name: 'verify';
      store: StoreOptions;
      job: string | undefined;
      run: string;
      key: string | undefined;
      pinSigner: string | undefined;
      /** Trust the run's embedded signer without a pin (else exit 10 naming its fingerprint). */
      trustUnpinnedSigner: boolean;
    }
  | {
      name: 'extract';
      store: StoreOptions;
      job: string | undefined;
      run: string;
      key: string;
      pinSigner: string | undefined;
      trustUnpinnedSigner: boolean;
      to: string;
      include: string[];
      exclude: string[];
      records: string[];
      force: boolean;
    };

export type ParsedCommand = Command & GlobalOptions;

export const COMMANDS = ['keygen', 'inspect', 'verify', 'extract', 'bundle', 'help', 'version'] as const;
/** Commands main() hands to their own files before this parser runs (help topics only here). */
export const DOCUMENT_COMMANDS: readonly string[] = ['open-export', 'verify-report'];

const GLOBAL = {
  json: { type: 'boolean' },
  'no-progress': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const STORE = {
  from: { type: 'string' },
  endpoint: { type: 'string' },
  region: { type: 'string' },
  'path-style': { type: 'boolean' },
} as const;

const READ = {
  ...STORE,
  job: { type: 'string' },
  run: { type: 'string' },
  key: { type: 'string' },
  'pin-signer': { type: 'string' },
} as const;

const SPECS = {
  keygen: { ...GLOBAL, out: { type: 'string' } },
  inspect: { ...GLOBAL, ...READ },
  verify: { ...GLOBAL, ...READ, 'trust-unpinned-signer': { type: 'boolean' } },
  extract: {
    ...GLOBAL,
    ...READ,
    'trust-unpinned-signer': { type: 'boolean' },
    to: { type: 'string' },
    include: { type: 'string', multiple: true },
    exclude: { type: 'string', multiple: true },
    record: { type: 'string', multiple: true },
    force: { type: 'boolean' },
  },
} as const;

/** `sha384:` and 96 hex digits, the fingerprint form @coffer/crypto prints. */
const FINGERPRINT = /^sha384:[0-9a-f]{96}$/;

function usage(message: string, topic?: string): RecoverError {
  const hint = topic ? ` (see: coffer-recover help ${topic})` : ' (see: coffer-recover help)';
  return new RecoverError('ERR_RECOVER_USAGE', `${message}${hint}`);
}

/** True when argv asks for JSON output, read before parsing so usage errors can be JSON too. */
export function wantsJson(argv: readonly string[]): boolean {
  return argv.includes('--json');
}

/**
 * Parses argv (without the node and script paths). Returns the command and its options.
 * Throws RecoverError ERR_RECOVER_USAGE for anything malformed.
 */
export function parseCommandLine(argv: readonly string[]): ParsedCommand {
  const json = wantsJson(argv);
  // Global flags may also come before the command: `coffer-recover --json verify ...`.
  let lead = 0;
  while (argv[lead] === '--json' || argv[lead] === '--no-progress') lead++;
  const leading = argv.slice(0, lead);
  argv = [...argv.slice(lead), ...leading];
  const first = argv[0];
  if (first === undefined || first === '--json' || first === '--help' || first === '-h') {
    return { name: 'help', topic: undefined, json, progress: false };
  }
  if (first === '--version' || first === '-V') return { name: 'version', json, progress: false };
  if (first.startsWith('-')) {
    throw usage('the command comes first: coffer-recover <keygen|inspect|verify|extract> [options]');
  }
  if (first === 'help') {
    const arg = argv[1];
    const topic = arg === undefined || arg.startsWith('-') ? undefined : arg;
    if (topic !== undefined && ![...COMMANDS, ...DOCUMENT_COMMANDS].includes(topic)) {
      throw usage('unknown help topic');
    }
    return { name: 'help', topic, json, progress: false };
  }
  if (first === 'version') return { name: 'version', json, progress: false };
  if (first === 'bundle') return parseBundle(argv.slice(1), json);
  // The word is not echoed: a secret pasted in the wrong place must not be printed back.
  if (!Object.hasOwn(SPECS, first)) throw usage(`unknown command (commands: ${COMMANDS.join(', ')})`);
  const name = first as keyof typeof SPECS;
  const rest = argv.slice(1);

  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    const parsed = parseArgs({
      args: [...rest],
      options: SPECS[name],
      strict: true,
      allowPositionals: false,
    });
    values = parsed.values as typeof values;
  } catch (e) {
    throw translateParseError(e, name);
  }
  const progress = values['no-progress'] !== true;
  if (values.help === true) return { name: 'help', topic: name, json, progress: false };

  const str = (k: string): string | undefined => {
    const v = values[k];
    if (typeof v !== 'string') return undefined;
    if (v === '') throw usage(`--${k} must not be empty`, name);
    return v;
  };
  const list = (k: string): string[] => {
    const v = values[k];
    return Array.isArray(v) ? v : [];
  };
  const need = (k: string): string => {
    const v = str(k);
    if (v === undefined) throw usage(`${name} needs --${k}`, name);
    return v;
  };

  if (name === 'keygen') return { name, out: need('out'), json, progress };

  const store: StoreOptions = {
    from: need('from'),
    endpoint: str('endpoint'),
    region: str('region'),
    pathStyle: values['path-style'] === true,
  };
  const isS3 = store.from.startsWith('s3://');
  if (!isS3 && (store.endpoint !== undefined || store.region !== undefined || store.pathStyle)) {
    throw usage('--endpoint, --region and --path-style apply only to --from s3://bucket/prefix', name);
  }
  const pin = str('pin-signer');
  const pinSigner = pin === undefined ? undefined : pin.toLowerCase();
  if (pinSigner !== undefined && !FINGERPRINT.test(pinSigner)) {
    throw usage('--pin-signer takes a fingerprint: sha384: followed by 96 hex digits', name);
  }
  const common = { store, job: str('job'), pinSigner, json, progress };

  if (name === 'inspect') {
    const run = str('run');
    const key = str('key');
    if (key !== undefined && run === undefined)
      throw usage('inspect --key lists records and needs --run', name);
    return { name, ...common, run, key };
  }
  const trustUnpinnedSigner = values['trust-unpinned-signer'] === true;
  if (trustUnpinnedSigner && pinSigner !== undefined) {
    throw usage('--trust-unpinned-signer and --pin-signer contradict each other; keep --pin-signer', name);
  }
  if (name === 'verify') return { name, ...common, trustUnpinnedSigner, run: need('run'), key: str('key') };
  const records = list('record');
  const include = list('include');
  const exclude = list('exclude');
  for (const [flag, items] of [
    ['record', records],
    ['include', include],
    ['exclude', exclude],
  ] as const) {
    if (items.some((i) => i === '')) throw usage(`--${flag} must not be empty`, name);
  }
  if (records.length > 0 && (include.length > 0 || exclude.length > 0)) {
    throw usage('--record selects exact records; do not combine it with --include/--exclude', name);
  }
  return {
    name,
    ...common,
    trustUnpinnedSigner,
    run: need('run'),
    key: need('key'),
    to: need('to'),
    include,
    exclude,
    records,
    force: values.force === true,
  };
}

const BUNDLE_OPTIONS = {
  ...GLOBAL,
  key: { type: 'string' },
  'pin-signer': { type: 'string' },
} as const;

/** `bundle open --key FILE [--pin-signer FP] BUNDLE.json` (the only bundle subcommand). */
function parseBundle(rest: readonly string[], json: boolean): ParsedCommand {
  if (rest[0] === '--help' || rest[0] === '-h')
    return { name: 'help', topic: 'bundle', json, progress: false };
  if (rest[0] !== 'open')
    throw usage('bundle takes the subcommand open: coffer-recover bundle open BUNDLE.json', 'bundle');
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...rest.slice(1)],
      options: BUNDLE_OPTIONS,
      strict: true,
      allowPositionals: true,
    }) as typeof parsed;
  } catch (e) {
    throw translateParseError(e, 'bundle');
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { name: 'help', topic: 'bundle', json, progress: false };
  if (positionals.length !== 1 || positionals[0] === '') {
    throw usage('bundle open takes exactly one BUNDLE.json file', 'bundle');
  }
  const key = typeof values.key === 'string' ? values.key : undefined;
  if (key === '') throw usage('--key must not be empty', 'bundle');
  const pin = typeof values['pin-signer'] === 'string' ? values['pin-signer'].toLowerCase() : undefined;
  if (pin !== undefined && !FINGERPRINT.test(pin)) {
    throw usage('--pin-signer takes a fingerprint: sha384: followed by 96 hex digits', 'bundle');
  }
  return { name: 'bundle', file: positionals[0]!, key, pinSigner: pin, json, progress: false };
}

const CREDENTIAL_LIKE = /access|secret|password|passwd|token|credential|session/i;

function translateParseError(e: unknown, command: string): RecoverError {
  const code = (e as { code?: string }).code;
  const message = e instanceof Error ? e.message : '';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    // parseArgs names only the option (never its `=value`); still keep just the name part.
    const m = /'(-{1,2}[A-Za-z0-9-]{1,64})/.exec(message);
    const opt = m?.[1] ?? 'an option';
    if (CREDENTIAL_LIKE.test(opt)) {
      return usage(
        `${opt}: credentials are never taken from the command line; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment`,
        command,
      );
    }
    return usage(`unknown option ${opt} for ${command}`, command);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const m = /'(-{1,2}[A-Za-z0-9-]{1,64})/.exec(message);
    return usage(`${m?.[1] ?? 'an option'} needs a value (or takes none)`, command);
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    // Never echo the argument: it could be a secret pasted in the wrong place.
    return usage(`${command} takes no positional arguments (options are --name value)`, command);
  }
  return usage(`cannot parse the command line for ${command}`, command);
}

/**
 * `parseArgs` for a command that takes options only. Its own messages can echo the offending
 * argument, and a pasted key must never be printed back, so any refusal becomes one usage error
 * naming the command's help.
 */
export function parseOptionsOnly<O extends ParseArgsConfig['options']>(
  argv: readonly string[],
  options: O,
  command: string,
): Record<string, string | boolean | undefined> {
  try {
    return parseArgs({ args: [...argv], strict: true, allowPositionals: false, options }).values as Record<
      string,
      string | boolean | undefined
    >;
  } catch {
    throw usage(`unknown option or stray argument (see coffer-recover ${command} --help)`);
  }
}
