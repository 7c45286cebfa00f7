/**
 * Test-only fault injection (the `/admin/test-fault/*` routes, HARNESS_TEST_FAULTS): a registry of
 * armed faults and wrappers that make a real destination ObjectStore or a real source connector
 * fail the way a real one would (the same error classes and codes), so black-box tests can drive
 * every branch of run classification through a started engine. The wrappers are installed only
 * when the flag is set; without it the engine never consults the registry.
 */
import { type ObjectStore, ObjectStoreError, type ObjectStoreErrorCode } from '@coffer/objectstore';
import { type RunSource, sourceError } from './source.ts';

export const DESTINATION_FAULTS = ['throttle', 'access-denied', 'reject', 'not-found', 'fault'] as const;
export const SOURCE_FAULTS = [
  'throttle',
  'read-error',
  'missing',
  'binding',
  'vanish',
  'too-large',
  'page-cap',
  'range-unsupported',
] as const;
export const DESTINATION_OPS = ['put', 'get', 'head', 'list', 'delete', 'any'] as const;
export const SOURCE_OPS = ['list', 'read', 'any'] as const;

export interface FaultSpec {
  target: 'destination' | 'source';
  /** Destination id (target destination); absent = every destination. */
  destination?: string;
  /** Job id (target source); absent = every job. */
  job?: string;
  fault: string;
  /** Store error code carried by `reject` (e.g. NoSuchBucket). */
  code?: string;
  /** How many operations fail (default 1); 0 = until disarmed. */
  times?: number;
  /** Matching operations to let through before failing (default 0). */
  after?: number;
  op?: string;
}

export interface ArmedFault extends Required<Omit<FaultSpec, 'destination' | 'job' | 'code'>> {
  id: string;
  destination: string | null;
  job: string | null;
  code: string | null;
  hits: number;
  seen: number;
}

const DEST_CODES: Record<string, ObjectStoreErrorCode> = {
  throttle: 'ERR_OBJECTSTORE_THROTTLED',
  'access-denied': 'ERR_OBJECTSTORE_ACCESS_DENIED',
  reject: 'ERR_OBJECTSTORE_REJECTED',
  'not-found': 'ERR_OBJECTSTORE_NOT_FOUND',
  fault: 'ERR_OBJECTSTORE_FAULT',
};
const SOURCE_CODES: Record<string, string> = {
  throttle: 'ERR_SOURCE_THROTTLED',
  'read-error': 'ERR_SOURCE_READ',
  missing: 'ERR_SOURCE_RESOURCE_MISSING',
  binding: 'ERR_SOURCE_BINDING',
  vanish: 'ERR_SOURCE_RECORD_VANISHED',
  'too-large': 'ERR_SOURCE_RECORD_TOO_LARGE',
  'page-cap': 'ERR_SOURCE_LISTING_OVER_CAP',
  'range-unsupported': 'ERR_SOURCE_RANGE_UNSUPPORTED',
};

/** The armed faults of one engine process. */
export class FaultRegistry {
  private readonly armed = new Map<string, ArmedFault>();
  private next = 1;

  /** Arms a fault; returns it. Throws TypeError for an unknown fault or op. */
  arm(spec: FaultSpec): ArmedFault {
    const dest = spec.target === 'destination';
    if (
      !(dest ? (DESTINATION_FAULTS as readonly string[]) : (SOURCE_FAULTS as readonly string[])).includes(
        spec.fault,
      )
    )
      throw new TypeError('unknown fault');
    const op = spec.op ?? (dest ? 'put' : 'read');
    if (!(dest ? (DESTINATION_OPS as readonly string[]) : (SOURCE_OPS as readonly string[])).includes(op))
      throw new TypeError('unknown op');
    const fault: ArmedFault = {
      id: `f${this.next++}`,
      target: spec.target,
      destination: spec.destination ?? null,
      job: spec.job ?? null,
      fault: spec.fault,
      code: spec.code ?? null,
      times: spec.times ?? 1,
      after: spec.after ?? 0,
      op,
      hits: 0,
      seen: 0,
    };
    this.armed.set(fault.id, fault);
    return fault;
  }

  /** Disarms one fault, or all when `id` is absent; returns how many were removed. */
  disarm(id?: string): number {
    if (id === undefined) {
      const n = this.armed.size;
      this.armed.clear();
      return n;
    }
    return this.armed.delete(id) ? 1 : 0;
  }

  list(): ArmedFault[] {
    return [...this.armed.values()].map((f) => ({ ...f }));
  }

  /** The fault that fires for this operation now (counting it), or null. */
  take(target: 'destination' | 'source', who: string, op: string): ArmedFault | null {
    for (const f of this.armed.values()) {
      if (f.target !== target) continue;
      if (target === 'destination' && f.destination !== null && f.destination !== who) continue;
      if (target === 'source' && f.job !== null && f.job !== who) continue;
      if (f.op !== 'any' && f.op !== op) continue;
      if (f.times !== 0 && f.hits >= f.times) continue;
      f.seen++;
      if (f.seen <= f.after) continue;
      f.hits++;
      return f;
    }
    return null;
  }
}

function destinationError(f: ArmedFault, key: string | undefined): ObjectStoreError {
  const code = DEST_CODES[f.fault] ?? 'ERR_OBJECTSTORE_FAULT';
  const storeCode =
    f.code ??
    (f.fault === 'throttle' ? 'SlowDown' : f.fault === 'access-denied' ? 'AccessDenied' : undefined);
  return new ObjectStoreError(code, `injected fault (${f.fault})`, {
    ...(storeCode !== undefined ? { storeCode } : {}),
    ...(key !== undefined ? { key } : {}),
    ...(f.fault === 'throttle' ? { status: 503 } : {}),
  });
}

/** Wraps a destination store so armed destination faults fire on its operations. */
export function faultyStore(id: string, store: ObjectStore, faults: FaultRegistry): ObjectStore {
  const check = (op: string, key?: string) => {
    const f = faults.take('destination', id, op);
    if (f) throw destinationError(f, key);
  };
  return {
    description: store.description,
    async put(key, body, options) {
      check('put', key);
      return store.put(key, body, options);
    },
    async get(key, range, options) {
      check('get', key);
      return store.get(key, range, options);
    },
    async getStream(key, range) {
      check('get', key);
      return store.getStream(key, range);
    },
    async head(key) {
      check('head', key);
      return store.head(key);
    },
    async list(prefix, options) {
      check('list');
      return store.list(prefix, options);
    },
    async *listAll(prefix) {
      check('list');
      yield* store.listAll(prefix);
    },
    async delete(key) {
      check('delete', key);
      return store.delete(key);
    },
  };
}

/** Wraps a source connector so armed source faults fire on listing and reads. */
export function faultySource(job: string, source: RunSource, faults: FaultRegistry): RunSource {
  const fire = async (op: string) => {
    const f = faults.take('source', job, op);
    if (f) throw await sourceError(SOURCE_CODES[f.fault] ?? 'ERR_SOURCE_READ', `injected fault (${f.fault})`);
  };
  return {
    type: source.type,
    binding: source.binding,
    namespace: source.namespace,
    description: source.description,
    async *enumerate(options) {
      await fire('list');
      yield* source.enumerate(options);
    },
    async read(name, options) {
      await fire('read');
      return source.read(name, options);
    },
    ...(source.readInto
      ? {
          readInto: async (name: string, buffer: Uint8Array) => {
            await fire('read');
            return source.readInto!(name, buffer);
          },
        }
      : {}),
    close: () => source.close(),
  };
}
