/** @coffer/engine: public surface. */
export {};
