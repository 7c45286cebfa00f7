/**
 * Configuration dual control and configuration history (docs/config-control.md): the two
 * approval policies (policy.ts), the pending-change store (store.ts), the apply step and its
 * proposal-time probe (apply.ts), proposing and deciding (service.ts) and the signed, hash-chained
 * version history (history.ts). `recordConfigVersion` is the one way any room appends a version.
 */
export * from './apply.ts';
export * from './history.ts';
export * from './policy.ts';
export * from './service.ts';
export * from './store.ts';
