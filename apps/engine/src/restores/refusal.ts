/**
 * `RestoreRefusal`: an engine-level refusal of a restore operation that is not one of
 * @coffer/restore's own errors (a plan that cannot be applied, an apply that is not found or not
 * resumable). It carries the status and the exact body docs/restore.md fixes, so the route maps it
 * without knowing why it happened; @coffer/restore's RestoreError carries its own status.
 */
export class RestoreRefusal extends Error {
  readonly status: number;
  readonly body: Readonly<Record<string, unknown>>;

  constructor(status: number, body: Record<string, unknown> & { error: string }) {
    super(body.error);
    this.name = 'RestoreRefusal';
    this.status = status;
    this.body = body;
  }
}

export function isRestoreRefusal(e: unknown): e is RestoreRefusal {
  return e instanceof RestoreRefusal;
}
