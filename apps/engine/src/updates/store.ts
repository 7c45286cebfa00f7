/**
 * The update lifecycle's persisted state, in the state store's `update_state` key-value table
 * (`state.updates`, SQLite or PostgreSQL), so a restart, a state restore or another replica sees
 * the same facts (docs/updates.md "Engine routes"):
 * - `record`: the latest UpdateRecord (what `GET /admin/update/status` shows);
 * - `floors`: the anti-rollback floor, the highest version ever settled per component; only ever
 *   raised (raiseFloor), never lowered, also not by a rollback;
 * - `channel`: the last accepted channel document's sequence and digest (replay protection across
 *   restarts); only a document at least as new replaces it;
 * - `schema-epoch`: the state schema epoch the engine runs on (raised when an update settles).
 */
import type { ComponentName, UpdateRecord } from '@coffer/update';
import { raiseFloor } from '@coffer/update';
import type { State } from '../state/index.ts';

export const UPDATE_STATE_KEYS = {
  record: 'record',
  floors: 'floors',
  channel: 'channel',
  schemaEpoch: 'schema-epoch',
} as const;

export type Floors = Partial<Record<ComponentName, string>>;

export interface AcceptedChannel {
  sequence: number;
  digest: string;
  acceptedAt: string;
}

export class UpdateStore {
  readonly #state: State;

  constructor(state: State) {
    this.#state = state;
  }

  async record(): Promise<UpdateRecord | null> {
    return (await this.#state.updates.get<UpdateRecord>(UPDATE_STATE_KEYS.record)) ?? null;
  }

  async putRecord(record: UpdateRecord): Promise<void> {
    await this.#state.updates.set(UPDATE_STATE_KEYS.record, record);
  }

  async floors(): Promise<Floors> {
    return (await this.#state.updates.get<Floors>(UPDATE_STATE_KEYS.floors)) ?? {};
  }

  /** Raises each named floor to the settled version when that is higher; never lowers one. */
  async raiseFloors(settled: Floors): Promise<Floors> {
    const floors = { ...(await this.floors()) };
    for (const [c, v] of Object.entries(settled) as [ComponentName, string][])
      floors[c] = raiseFloor(floors[c] ?? null, v);
    await this.#state.updates.set(UPDATE_STATE_KEYS.floors, floors);
    return floors;
  }

  async accepted(): Promise<AcceptedChannel | null> {
    return (await this.#state.updates.get<AcceptedChannel>(UPDATE_STATE_KEYS.channel)) ?? null;
  }

  /** Records an accepted document unless a newer one is already recorded. */
  async accept(sequence: number, digest: string, at: string): Promise<void> {
    const last = await this.accepted();
    if (last !== null && (last.sequence > sequence || (last.sequence === sequence && last.digest === digest)))
      return;
    await this.#state.updates.set(UPDATE_STATE_KEYS.channel, { sequence, digest, acceptedAt: at });
  }

  async schemaEpoch(): Promise<number | null> {
    const v = await this.#state.updates.get<number>(UPDATE_STATE_KEYS.schemaEpoch);
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null;
  }

  async setSchemaEpoch(epoch: number): Promise<void> {
    await this.#state.updates.set(UPDATE_STATE_KEYS.schemaEpoch, epoch);
  }
}
