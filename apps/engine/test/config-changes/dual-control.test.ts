/**
 * Configuration dual control through HTTP with distinct signed-in people (perimeter identities):
 * an owner turns the policy on; job upserts, deletes and bulk items are held as pending changes;
 * the proposer (and the admin token) cannot approve; a second person applies or rejects; the bulk
 * cap drops to 10; `ifMatchRev` is checked at proposal and again at apply; an approver who lost
 * the write capability is refused at the commit point; every step is an audit row; turning the
 * policy off waits for another owner. On SQLite and on PostgreSQL.
 */

import t from 'tap';
import { approve, getChange } from '../../src/config-changes/index.ts';
import { bearer } from '../helpers/engine.ts';
import { ISSUER } from '../helpers/perimeter.ts';
import { job, peopleWorld } from './helpers.ts';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`configuration dual control (${backend})`, async (t) => {
    const p = await peopleWorld(t, backend);
    const { w } = p;
    const state = w.e.app.state;
    const sub = (name: string) => `${ISSUER}#${name}`;

    t.test('turning the policy on needs two people who may write jobs, and an owner', async (t) => {
      const early = await w.post('/config/approval-policy', { enabled: true });
      t.equal(early.status, 409, early.text);
      t.equal(early.json().writers, 0);
      await p.grant([
        ['alice', 'operator'],
        ['bob', 'operator'],
        ['carol', 'viewer'],
        ['olga', 'owner'],
        ['oscar', 'owner'],
      ]);
      const byOperator = await w.post('/config/approval-policy', { enabled: true }, await p.as('alice'));
      t.equal(byOperator.status, 403, 'an operator cannot set the policy');
      const on = await w.post('/config/approval-policy', { enabled: true }, await p.as('olga'));
      t.equal(on.status, 200, on.text);
      t.same(on.json(), { ok: true, enabled: true, changed: true });
      const view = (await w.get('/config/approval-policy', await p.as('carol'))).json();
      t.match(view, { configApproval: { enabled: true, setBy: sub('olga') }, maxBatch: 10 });
      t.same(await state.settings.get('config.approval.enabled'), {
        enabled: true,
        by: sub('olga'),
        at: view.configApproval.setAt,
      });
      const rows = await p.audit('config-approval-policy');
      t.match(rows[0], { outcome: 'applied', actor: { subject: sub('olga') }, detail: { enabled: true } });
    });

    t.test(
      'an upsert is held; the proposer and the admin token cannot approve; a second person applies',
      async (t) => {
        const held = await w.post('/jobs', job('docs'), await p.as('alice'));
        t.equal(held.status, 202, held.text);
        t.match(held.json(), {
          ok: true,
          pending: true,
          changeId: /^cc_/,
          status: 'pending',
          kind: 'job-upsert',
          id: 'docs',
          baseRev: null,
        });
        const id = held.json().changeId as string;
        t.equal(await state.jobs.get('docs'), null, 'nothing applied yet');

        const listed = (await w.get('/config/changes?status=pending', await p.as('carol'))).json().changes;
        t.match(listed, [{ id, kind: 'job-upsert', target: 'docs', proposedBy: { subject: sub('alice') } }]);
        t.equal((await w.get('/config/changes?status=nope')).status, 400);

        const self = await w.post(`/config/changes/${id}/approve`, {}, await p.as('alice'));
        t.equal(self.status, 403, 'maker is not checker');
        t.match(self.json(), { error: /maker is not checker/ });
        const token = await w.post(`/config/changes/${id}/approve`, {}, bearer());
        t.equal(token.status, 403, 'the admin token has no subject');
        const viewer = await w.post(`/config/changes/${id}/approve`, {}, await p.as('carol'));
        t.equal(viewer.status, 403, viewer.text);
        t.match(viewer.json(), { required: 'job.write' });
        t.equal(await state.jobs.get('docs'), null, 'still nothing applied');

        const ok = await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'));
        t.equal(ok.status, 200, ok.text);
        t.match(ok.json(), { ok: true, status: 'applied', kind: 'job-upsert', target: 'docs', configRev: 1 });
        t.equal((await state.jobs.get('docs'))?.configRev, 1, 'the job is applied');
        t.equal(
          (await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'))).status,
          409,
          'single use',
        );

        const proposed = await p.audit('config-change-proposed');
        t.match(
          proposed.find((r: { target: string }) => r.target === id),
          {
            outcome: 'queued',
            actor: { subject: sub('alice') },
            detail: { kind: 'job-upsert', jobId: 'docs' },
          },
        );
        const approved = await p.audit('config-change-approved');
        t.match(
          approved.find(
            (r: { target: string; outcome: string }) => r.target === id && r.outcome === 'applied',
          ),
          {
            actor: { subject: sub('bob') },
            approver: { subject: sub('bob') },
            detail: { kind: 'job-upsert', jobId: 'docs', configRev: 1 },
          },
        );
        t.match(
          approved.find(
            (r: { target: string; detail: { reason?: string } }) =>
              r.target === id && r.detail.reason === 'maker-is-checker',
          ),
          { outcome: 'refused', actor: { subject: sub('alice') } },
        );
      },
    );

    t.test('the admin token cannot propose while the policy is on', async (t) => {
      const r = await w.post('/jobs', job('token-job'));
      t.equal(r.status, 403, r.text);
      t.match(r.json(), { refusal: 'no-subject' });
      t.equal((await w.post('/jobs/delete', { id: 'docs' })).status, 403);
    });

    t.test('a rejected change is dropped', async (t) => {
      const held = await w.post('/jobs', job('docs', { cadenceSeconds: 7200 }), await p.as('alice'));
      t.equal(held.status, 202, held.text);
      t.same(held.json().changedFields, ['cadenceSeconds'], 'names, never values');
      const id = held.json().changeId;
      const rej = await w.post(`/config/changes/${id}/reject`, {}, await p.as('bob'));
      t.same(rej.json(), { ok: true, id, status: 'rejected' });
      t.equal((await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'))).status, 409);
      t.equal((await state.jobs.get('docs'))?.config.cadenceSeconds, 3600, 'unchanged');
      const rows = await p.audit('config-change-rejected');
      t.match(rows[0], {
        target: id,
        outcome: 'applied',
        actor: { subject: sub('bob') },
        detail: { kind: 'job-upsert', jobId: 'docs' },
      });
    });

    t.test('bulk: pending per item, and the cap drops to 10', async (t) => {
      const eleven = Array.from({ length: 11 }, (_, i) => job(`bulk-${i}`));
      const over = await w.post('/jobs/bulk', { jobs: eleven }, await p.as('alice'));
      t.equal(over.status, 400, over.text);
      t.equal(over.json().maxBatch, 10, 'maxBatch echoed');
      const r = await w.post(
        '/jobs/bulk',
        { jobs: [job('bulk-a'), { id: 'bulk-b' }, job('bulk-c')] },
        await p.as('alice'),
      );
      t.equal(r.status, 200, r.text);
      const out = r.json();
      t.match(out, { ok: false, applied: 0, pending: 2, failed: 1, maxBatch: 10 });
      t.match(out.outcomes, [
        { index: 0, id: 'bulk-a', outcome: 'pending', changeId: /^cc_/ },
        { index: 1, id: 'bulk-b', outcome: 'error' },
        { index: 2, id: 'bulk-c', outcome: 'pending', changeId: /^cc_/ },
      ]);
      t.equal(await state.jobs.get('bulk-a'), null);
      const c = out.outcomes[2].changeId;
      t.equal((await w.post(`/config/changes/${c}/approve`, {}, await p.as('bob'))).status, 200);
      t.equal((await state.jobs.get('bulk-c'))?.configRev, 1, 'one item applied on approval');
      const bulkRow = (await p.audit('job-bulk'))[0];
      t.match(bulkRow, { detail: { items: 3, applied: 0, pending: 2, errors: 1 } });
    });

    t.test('ifMatchRev is checked at proposal and again at apply', async (t) => {
      const stale = await w.post('/jobs', { ...job('docs'), ifMatchRev: 7 }, await p.as('alice'));
      t.equal(stale.status, 409, 'refused at proposal');
      t.match(stale.json(), {
        refusal: 'precondition-failed',
        precondition: { reason: 'base-moved', yourRev: 7, currentRev: 1 },
      });
      const exists = await w.post('/jobs', { ...job('docs'), ifMatchRev: null }, await p.as('alice'));
      t.match(exists.json(), { precondition: { reason: 'already-exists' } });

      const first = await w.post(
        '/jobs',
        { ...job('docs', { name: 'A' }), ifMatchRev: 1 },
        await p.as('alice'),
      );
      t.equal(first.status, 202, first.text);
      const second = await w.post('/jobs', job('docs', { name: 'B' }), await p.as('bob'));
      t.equal(second.status, 202);
      t.equal(
        (await w.post(`/config/changes/${second.json().changeId}/approve`, {}, await p.as('alice'))).status,
        200,
      );
      t.equal((await state.jobs.get('docs'))?.configRev, 2);
      const late = await w.post(`/config/changes/${first.json().changeId}/approve`, {}, await p.as('bob'));
      t.equal(late.status, 409, 'refused at apply: the job moved');
      t.match(late.json(), {
        refusal: 'precondition-failed',
        status: 'refused',
        precondition: { reason: 'base-moved', yourRev: 1, currentRev: 2, changedFields: ['name'] },
      });
      t.equal((await state.jobs.get('docs'))?.config.name, 'B', 'the stale change was not applied');
      const change = await getChange(state, first.json().changeId);
      t.equal(change?.status, 'refused');

      const staleDelete = await w.post('/jobs/delete', { id: 'docs', ifMatchRev: 1 }, await p.as('alice'));
      t.equal(staleDelete.status, 409);
      t.match(staleDelete.json(), { precondition: { reason: 'base-moved' } });
    });

    t.test('an approver who lost job.write is refused at the commit point', async (t) => {
      const held = await w.post('/jobs', job('docs', { name: 'C' }), await p.as('alice'));
      const id = held.json().changeId as string;
      await state.roles.assign({
        subject: sub('bob'),
        role: 'viewer',
        email: 'bob@example.com',
        grantedBy: null,
      });
      const refused = await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'));
      t.equal(refused.status, 403, refused.text);
      // The service itself (the commit point) re-reads the role: a caller that passed the route's
      // check before the role was removed is still refused.
      const change = await getChange(state, id);
      const r = await approve(
        {
          state,
          signer: w.e.app.keys.signer,
          destinations: w.e.app.destinations,
          log: w.e.app.log,
          checkSource: () => null,
        },
        change!,
        { subject: sub('bob'), email: 'bob@example.com', method: 'perimeter-access' },
      );
      t.same(r, { outcome: 'forbidden', required: 'job.write' });
      t.equal((await state.jobs.get('docs'))?.config.name, 'B', 'not applied');
      await state.roles.assign({
        subject: sub('bob'),
        role: 'operator',
        email: 'bob@example.com',
        grantedBy: null,
      });
      const ok = await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'));
      t.equal(ok.status, 200, 'still pending after the refusal; applied once bob may write again');
      t.equal((await state.jobs.get('docs'))?.config.name, 'C');
      const refusedRow = (await p.audit('config-change-approved')).find(
        (e: { target: string; outcome: string }) => e.target === id && e.outcome === 'refused',
      );
      t.match(refusedRow, { detail: { reason: 'capability' } });
    });

    t.test('an expired change cannot be approved; two racing approvals apply once', async (t) => {
      const held = await w.post('/jobs', job('expiring'), await p.as('alice'));
      const id = held.json().changeId as string;
      const key = `config.change.${id}`;
      const stored = (await state.settings.get<Record<string, unknown>>(key))!;
      await state.settings.set(key, { ...stored, expiresAt: new Date(Date.now() - 1000).toISOString() });
      const listed = (await w.get('/config/changes?status=expired')).json().changes;
      t.match(listed, [{ id, status: 'expired' }]);
      const late = await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'));
      t.equal(late.status, 409, late.text);
      t.match(late.json(), { status: 'expired' });
      t.equal(await state.jobs.get('expiring'), null);

      const race = await w.post('/jobs', job('raced'), await p.as('alice'));
      const rid = race.json().changeId as string;
      const [a, b] = await Promise.all([
        w.post(`/config/changes/${rid}/approve`, {}, await p.as('bob')),
        w.post(`/config/changes/${rid}/approve`, {}, await p.as('olga')),
      ]);
      t.same([a.status, b.status].sort(), [200, 409], 'one decision wins');
      t.equal((await state.jobs.get('raced'))?.configRev, 1);
    });

    t.test('a delete is held and applied by a second person', async (t) => {
      const held = await w.post('/jobs/delete', { id: 'bulk-c' }, await p.as('alice'));
      t.equal(held.status, 202, held.text);
      t.match(held.json(), { pending: true, kind: 'job-delete', id: 'bulk-c', baseRev: 1 });
      t.not(await state.jobs.get('bulk-c'), null);
      const ok = await w.post(`/config/changes/${held.json().changeId}/approve`, {}, await p.as('bob'));
      t.equal(ok.status, 200, ok.text);
      t.match(ok.json(), { kind: 'job-delete', configRev: 1 });
      t.equal(await state.jobs.get('bulk-c'), null, 'deleted');
      t.match((await p.audit('job-delete'))[0], {
        outcome: 'applied',
        approver: { subject: sub('bob') },
        detail: { deletedRev: 1 },
      });
    });

    t.test('turning the policy off waits for another owner', async (t) => {
      const off = await w.post('/config/approval-policy', { enabled: false }, await p.as('olga'));
      t.equal(off.status, 202, off.text);
      t.match(off.json(), { pending: true, kind: 'policy-disable', changeId: /^cc_/ });
      const id = off.json().changeId;
      t.equal(
        (await w.post(`/config/changes/${id}/approve`, {}, await p.as('olga'))).status,
        403,
        'not by the maker',
      );
      t.equal(
        (await w.post(`/config/changes/${id}/approve`, {}, await p.as('bob'))).status,
        403,
        'an owner approves',
      );
      t.equal((await w.get('/config/approval-policy')).json().configApproval.enabled, true, 'still on');
      const ok = await w.post(`/config/changes/${id}/approve`, {}, await p.as('oscar'));
      t.equal(ok.status, 200, ok.text);
      t.equal((await w.get('/config/approval-policy')).json().configApproval.enabled, false);
      const direct = await w.post('/jobs', job('after'));
      t.equal(direct.status, 200, 'applied at once again');
      const rows = await p.audit('config-approval-policy');
      t.match(rows[0], {
        outcome: 'applied',
        approver: { subject: sub('oscar') },
        detail: { enabled: false },
      });
      t.match(rows[1], { outcome: 'queued', actor: { subject: sub('olga') }, detail: { enabled: false } });
    });
  });
