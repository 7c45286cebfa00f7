/**
 * The destinations as runs see them: the engine's stores, each wrapped for fault injection when
 * the test-fault registry is on (HARNESS_TEST_FAULTS), so a harness can fail a write or a read of
 * one destination without touching the others.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { type FaultRegistry, faultyStore } from './faults.ts';

export function runDestinations(
  destinations: ReadonlyMap<string, ObjectStore>,
  faults: FaultRegistry | null,
): ReadonlyMap<string, ObjectStore> {
  if (!faults) return destinations;
  return new Map([...destinations].map(([id, s]) => [id, faultyStore(id, s, faults)]));
}
