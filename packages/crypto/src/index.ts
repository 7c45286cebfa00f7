/** @coffer/crypto: public surface. */
export {};
