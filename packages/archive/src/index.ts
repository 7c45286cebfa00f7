/** @coffer/archive: public surface. */
export {};
