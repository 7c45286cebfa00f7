/** @coffer/recover: public surface. */
export {};
