/**
 * Reading a SCIM `PatchOp` message (RFC 7644 §3.5.2) for the deprovision-only facade
 * (docs/scim.md "PATCH"). The one change it accepts is setting `active` to false, in the forms
 * identity providers send:
 *
 * - Okta: `{ op: 'replace', value: { active: false } }` (no path, the value an object);
 * - Entra ID: `{ op: 'Replace', path: 'active', value: 'False' }` (a path, the value a string).
 *
 * `op` is case-insensitive and may be `replace` or `add` (for a single-valued attribute `add`
 * replaces, §3.5.2.1); attribute names are case-insensitive (RFC 7643 §2.1) and may carry the
 * core User schema URN; the value is the boolean `false` or the string `false` in any case.
 * Every operation of the message must be such a change: a message that also touches any other
 * attribute, removes `active`, or sets it to true is refused whole (400 with the RFC's
 * `scimType`), so a refused PATCH never changes anything.
 */

export const PATCH_OP_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:user';
/** More operations than any provider sends for one user. */
const MAX_OPERATIONS = 100;

export type ScimType = 'invalidSyntax' | 'invalidValue' | 'mutability' | 'invalidPath' | 'noTarget';

export type PatchVerdict =
  | { ok: true; operations: number }
  | { ok: false; scimType: ScimType; detail: string; reason: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A member of `o` by case-insensitive name (RFC 7644 attribute and member names). */
function member(o: Record<string, unknown>, name: string): unknown {
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(o)) if (k.toLowerCase() === want) return v;
  return undefined;
}

/** `active`, with or without the core User schema URN prefix; anything else is another attribute. */
function namesActive(attribute: string): boolean {
  let a = attribute.trim().toLowerCase();
  if (a.startsWith(`${USER_SCHEMA}:`)) a = a.slice(USER_SCHEMA.length + 1);
  return a === 'active';
}

const refuse = (scimType: ScimType, detail: string, reason: string): PatchVerdict => ({
  ok: false,
  scimType,
  detail,
  reason,
});

const ONLY_ACTIVE = refuse(
  'mutability',
  'this SCIM service only deprovisions: the one attribute a PATCH may change is active (to false)',
  'other-attribute',
);

/** The verdict on one `active` value. */
function activeValue(v: unknown): PatchVerdict | null {
  if (v === false) return null;
  if (typeof v === 'string' && v.trim().toLowerCase() === 'false') return null;
  if (v === true || (typeof v === 'string' && v.trim().toLowerCase() === 'true'))
    return refuse(
      'invalidValue',
      'this SCIM service never activates users: active may only be set to false',
      'activate',
    );
  return refuse('invalidValue', 'active must be false (a boolean, or the string "false")', 'bad-value');
}

/** Reads a PATCH body: `{ ok: true }` only when every operation sets active to false. */
export function readDeprovisionPatch(body: unknown): PatchVerdict {
  if (!isObject(body)) return refuse('invalidSyntax', 'the body must be a SCIM PatchOp message', 'syntax');
  const schemas = member(body, 'schemas');
  if (
    !Array.isArray(schemas) ||
    !schemas.some((s) => typeof s === 'string' && s.toLowerCase() === PATCH_OP_SCHEMA.toLowerCase())
  )
    return refuse('invalidSyntax', `schemas must include ${PATCH_OP_SCHEMA}`, 'syntax');
  const operations = member(body, 'Operations');
  if (!Array.isArray(operations) || operations.length === 0 || operations.length > MAX_OPERATIONS)
    return refuse(
      'invalidSyntax',
      `Operations must be an array of 1 to ${MAX_OPERATIONS} operations`,
      'syntax',
    );
  for (const op of operations) {
    if (!isObject(op)) return refuse('invalidSyntax', 'each operation must be an object', 'syntax');
    const kind = member(op, 'op');
    if (typeof kind !== 'string') return refuse('invalidSyntax', 'each operation needs an op', 'syntax');
    const k = kind.toLowerCase();
    if (k === 'remove') return ONLY_ACTIVE;
    if (k !== 'replace' && k !== 'add')
      return refuse('invalidSyntax', 'op must be add, remove or replace', 'syntax');
    const path = member(op, 'path');
    const value = member(op, 'value');
    if (path !== undefined) {
      if (typeof path !== 'string') return refuse('invalidPath', 'path must be a string', 'syntax');
      if (!namesActive(path)) return ONLY_ACTIVE;
      const verdict = activeValue(value);
      if (verdict) return verdict;
      continue;
    }
    if (!isObject(value) || Object.keys(value).length === 0)
      return refuse('invalidSyntax', 'an operation without a path needs an object value', 'syntax');
    for (const [name, v] of Object.entries(value)) {
      if (!namesActive(name)) return ONLY_ACTIVE;
      const verdict = activeValue(v);
      if (verdict) return verdict;
    }
  }
  return { ok: true, operations: operations.length };
}
