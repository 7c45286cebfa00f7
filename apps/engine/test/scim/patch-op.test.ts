// The PatchOp reader of the SCIM facade (docs/scim.md "PATCH"): the deactivation forms providers
// send are accepted; everything else is refused whole with the RFC 7644 scimType.
import t from 'tap';
import { readDeprovisionPatch } from '../../src/routes/scim/patch-op.ts';

const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
const msg = (Operations: unknown) => ({ schemas: [PATCH_OP], Operations });

t.test('accepted deactivations', async (t) => {
  for (const body of [
    msg([{ op: 'replace', value: { active: false } }]), // Okta
    msg([{ op: 'Replace', path: 'active', value: 'False' }]), // Entra ID
    msg([{ op: 'REPLACE', path: 'Active', value: 'false' }]),
    msg([{ op: 'add', path: 'active', value: false }]),
    msg([{ op: 'replace', path: `${USER}:active`, value: false }]),
    msg([{ op: 'replace', value: { [`${USER}:active`]: 'FALSE' } }]),
    { schemas: [PATCH_OP.toUpperCase()], operations: [{ op: 'replace', value: { Active: false } }] },
    msg([
      { op: 'Replace', path: 'active', value: 'False' },
      { op: 'replace', value: { active: false } },
    ]),
  ])
    t.match(readDeprovisionPatch(body), { ok: true }, JSON.stringify(body).slice(60, 140));
});

t.test('refused, with the scimType', async (t) => {
  const cases: Array<[unknown, string, string]> = [
    [null, 'invalidSyntax', 'syntax'],
    [[], 'invalidSyntax', 'syntax'],
    [{ Operations: [{ op: 'replace', value: { active: false } }] }, 'invalidSyntax', 'syntax'],
    [msg('replace'), 'invalidSyntax', 'syntax'],
    [msg(new Array(101).fill({ op: 'replace', path: 'active', value: false })), 'invalidSyntax', 'syntax'],
    [msg([{ path: 'active', value: false }]), 'invalidSyntax', 'syntax'],
    [msg([{ op: 'copy', path: 'active', value: false }]), 'invalidSyntax', 'syntax'],
    [msg([{ op: 'replace', value: {} }]), 'invalidSyntax', 'syntax'],
    [msg([{ op: 'replace', value: false }]), 'invalidSyntax', 'syntax'],
    [msg([{ op: 'replace', path: 7, value: false }]), 'invalidPath', 'syntax'],
    [msg([{ op: 'replace', path: 'active', value: true }]), 'invalidValue', 'activate'],
    [msg([{ op: 'Replace', path: 'active', value: 'True' }]), 'invalidValue', 'activate'],
    [msg([{ op: 'replace', path: 'active', value: 0 }]), 'invalidValue', 'bad-value'],
    [msg([{ op: 'replace', path: 'active', value: null }]), 'invalidValue', 'bad-value'],
    [msg([{ op: 'replace', path: 'active' }]), 'invalidValue', 'bad-value'],
    [msg([{ op: 'remove', path: 'active' }]), 'mutability', 'other-attribute'],
    [msg([{ op: 'replace', path: 'userName', value: 'x' }]), 'mutability', 'other-attribute'],
    [
      msg([{ op: 'replace', path: 'emails[type eq "work"].value', value: 'x' }]),
      'mutability',
      'other-attribute',
    ],
    [msg([{ op: 'replace', value: { active: false, displayName: 'x' } }]), 'mutability', 'other-attribute'],
    [
      msg([
        { op: 'replace', path: 'active', value: false },
        { op: 'replace', path: 'active', value: true },
      ]),
      'invalidValue',
      'activate',
    ],
    [
      msg([
        { op: 'replace', path: 'active', value: false },
        { op: 'add', path: 'groups', value: [{ value: 'admins' }] },
      ]),
      'mutability',
      'other-attribute',
    ],
  ];
  for (const [body, scimType, reason] of cases) {
    const v = readDeprovisionPatch(body);
    t.match(v, { ok: false, scimType, reason }, JSON.stringify(body)?.slice(0, 120));
  }
});
