/** @coffer/audit: public surface. */
export {};
