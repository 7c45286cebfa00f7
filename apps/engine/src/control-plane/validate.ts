/**
 * The shape check of an arriving export document (after its signature verified): the document's
 * TypeBox schema, each job's configuration against the stored job schema (jobs/schema.ts), and
 * the plaintext-secret scan. The first problem is reported by JSON path, never by value.
 */
import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { StoredJob } from '../jobs/index.ts';
import type { ControlPlaneExport } from './document.ts';
import { findPlaintextSecret } from './secret-scan.ts';

const Obj = Type.Object({}, { additionalProperties: true });
const Id = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' });
const Count = Type.Integer({ minimum: 0 });

const Run = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 128 }),
    jobId: Id,
    seq: Type.Integer({ minimum: 1 }),
    status: Type.Union(['ok', 'failed', 'abandoned'].map((s) => Type.Literal(s))),
    startedAt: Type.String({ minLength: 1 }),
    prevRunId: Type.Union([Type.String(), Type.Null()]),
  },
  { additionalProperties: true },
);

const ExportSchema = Type.Object(
  {
    v: Type.Literal(1),
    kind: Type.Literal('coffer-control-plane-export'),
    exportedAt: Type.String(),
    engineVersion: Type.String(),
    signerFingerprint: Type.String(),
    slices: Type.Object(
      {
        configuration: Type.Object(
          {
            jobs: Type.Array(
              Type.Object(
                { id: Id, configRev: Type.Integer({ minimum: 1 }), config: Obj },
                { additionalProperties: false },
              ),
            ),
            connections: Type.Array(Obj),
            notify: Type.Object(
              {
                channels: Type.Array(
                  Type.Object(
                    {
                      id: Type.String({ minLength: 1 }),
                      kind: Type.String(),
                      name: Type.String(),
                      enabled: Type.Boolean(),
                    },
                    { additionalProperties: true },
                  ),
                ),
                rules: Type.Array(
                  Type.Object(
                    { id: Type.String({ minLength: 1 }), scope: Type.String(), rule: Obj },
                    { additionalProperties: false },
                  ),
                ),
              },
              { additionalProperties: false },
            ),
            policies: Obj,
            retention: Type.Object(
              { pins: Type.Array(Type.Object({ key: Type.String(), value: Type.Unknown() })) },
              { additionalProperties: false },
            ),
          },
          { additionalProperties: false },
        ),
        resume: Type.Object(
          {
            runsRecordedTotal: Count,
            jobs: Type.Array(
              Type.Object(
                {
                  id: Id,
                  recordedTotal: Count,
                  rolledOver: Count,
                  runs: Type.Array(Run),
                  standDown: Type.Union([Obj, Type.Null()]),
                  stale: Type.Union([Obj, Type.Null()]),
                },
                { additionalProperties: false },
              ),
            ),
          },
          { additionalProperties: false },
        ),
        authority: Type.Object(
          {
            members: Type.Array(
              Type.Object(
                { subject: Type.String({ minLength: 1 }), role: Type.String({ minLength: 1 }) },
                { additionalProperties: true },
              ),
            ),
            customRoles: Type.Array(
              Type.Object(
                {
                  name: Type.String({ minLength: 1 }),
                  base: Type.String({ minLength: 1 }),
                  capabilities: Type.Array(Type.String()),
                },
                { additionalProperties: true },
              ),
            ),
          },
          { additionalProperties: false },
        ),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const checkExport = Compile(ExportSchema);
const checkJob = Compile(StoredJob);

export interface DocumentProblem {
  path: string;
  error: string;
}

function jsonPath(instancePath: string): string {
  return `$${instancePath
    .split('/')
    .slice(1)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('')}`;
}

/**
 * The first problem of `doc` as an export to apply, or null: its shape, each job (ids agree, the
 * configuration is a valid stored job), and plaintext secrets (`knownSecrets`: the engine's own).
 */
export function documentProblem(
  doc: ControlPlaneExport,
  knownSecrets: readonly string[],
): DocumentProblem | null {
  const secret = findPlaintextSecret(doc, knownSecrets);
  if (secret) return { path: secret.path, error: `plaintext secret refused (${secret.rule})` };
  if (!checkExport.Check(doc)) {
    const first = checkExport.Errors(doc)[0];
    return { path: jsonPath(first?.instancePath ?? ''), error: 'the export document is malformed' };
  }
  const jobs = doc.slices.configuration.jobs;
  for (let i = 0; i < jobs.length; i++) {
    const j = jobs[i]!;
    const at = `$.slices.configuration.jobs[${i}]`;
    if (j.config.id !== j.id) return { path: `${at}.config.id`, error: 'the job id does not match' };
    if (!checkJob.Check(j.config)) {
      const first = checkJob.Errors(j.config)[0];
      return { path: `${at}.config${jsonPath(first?.instancePath ?? '').slice(1)}`, error: 'invalid job' };
    }
  }
  const rings = doc.slices.resume.jobs;
  for (let i = 0; i < rings.length; i++) {
    const r = rings[i]!;
    for (let k = 0; k < r.runs.length; k++)
      if (r.runs[k]!.jobId !== r.id)
        return { path: `$.slices.resume.jobs[${i}].runs[${k}].jobId`, error: 'a run of another job' };
  }
  return null;
}
