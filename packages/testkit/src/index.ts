/** @coffer/testkit: public surface. */
export {};
