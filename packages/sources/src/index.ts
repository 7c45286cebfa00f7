/** @coffer/sources: public surface. */
export {};
