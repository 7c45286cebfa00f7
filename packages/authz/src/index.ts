/** @coffer/authz: public surface. */
export {};
