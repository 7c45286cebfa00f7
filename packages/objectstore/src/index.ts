/** @coffer/objectstore: public surface. */
export {};
