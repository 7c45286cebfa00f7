/**
 * Shared helpers of the engine event tests: a collector subscribed to `app.events` and a wait for
 * the events raised so far to be delivered (subscribers run on a later turn of the event loop).
 */
import type { FastifyInstance } from 'fastify';
import type { EngineEvent, EngineEventName } from '../../src/events.ts';

export interface Collector {
  all: EngineEvent[];
  /** The events of one name, in the order they were raised. */
  named(name: EngineEventName): EngineEvent[];
  /** Resolves once an event matching `pred` was delivered (fails after `ms`). */
  waitFor(pred: (e: EngineEvent) => boolean, ms?: number): Promise<EngineEvent>;
  stop(): void;
}

/** Lets every event raised so far reach its subscribers. */
export async function delivered(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
}

export function collect(app: FastifyInstance): Collector {
  const all: EngineEvent[] = [];
  const stop = app.events.subscribe((e) => {
    all.push(e);
  });
  return {
    all,
    named: (name) => all.filter((e) => e.name === name),
    async waitFor(pred, ms = 10_000) {
      const until = Date.now() + ms;
      for (;;) {
        const hit = all.find(pred);
        if (hit) return hit;
        if (Date.now() > until) throw new Error('the awaited engine event was not raised');
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    stop,
  };
}
