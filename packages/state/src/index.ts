/** @coffer/state: public surface. */
export {};
