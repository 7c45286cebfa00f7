/** The main figures of a signed report, per kind, as tables (docs/reports.md section 2). */
import { formatTime } from '../../components/ui.tsx';
import type { AttestationData, CoverageData, DrillsData, ReportBody } from './types.ts';

function seconds(s: number | null | undefined): string {
  if (s === null || s === undefined) return '–';
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86_400).toFixed(1)} days`;
}

const VERDICT: Record<string, string> = {
  covered: '✓ covered',
  stale: '⚠ stale',
  'never-run': '✗ never run',
};

function Coverage({ d }: { d: CoverageData }) {
  return (
    <>
      <p data-figure="summary">
        {d.summary.jobs} job{d.summary.jobs === 1 ? '' : 's'}: {d.summary.covered} covered, {d.summary.stale}{' '}
        stale, {d.summary.neverRun} never run (evaluated at {formatTime(d.evaluatedAt)}).
      </p>
      <div className="table-wrap">
        <table>
          <caption className="visually-hidden">Backup coverage per job</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Verdict</th>
              <th scope="col">Last success</th>
              <th scope="col">Age</th>
              <th scope="col">Runs in period (ok / failed / total)</th>
              <th scope="col">Destinations</th>
            </tr>
          </thead>
          <tbody>
            {d.jobs.map((j) => (
              <tr key={j.job} data-job={j.job}>
                <th scope="row">
                  {j.name ?? j.job}
                  {j.name ? <span className="muted"> ({j.job})</span> : null}
                </th>
                <td data-verdict={j.verdict}>{VERDICT[j.verdict] ?? j.verdict}</td>
                <td>{formatTime(j.lastSuccess?.finishedAt ?? j.lastSuccess?.startedAt)}</td>
                <td>{seconds(j.lastSuccess?.ageSeconds)}</td>
                <td>
                  {j.runsInPeriod.ok} / {j.runsInPeriod.failed} / {j.runsInPeriod.total}
                </td>
                <td>
                  {j.destinations
                    .map((x) => `${x.id}: ${x.state} (${x.verifiedCopies} verified)`)
                    .join('; ') || '–'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function Drills({ d }: { d: DrillsData }) {
  return (
    <>
      <p data-figure="summary">
        {d.summary.jobs} job{d.summary.jobs === 1 ? '' : 's'}: {d.summary.drilledInPeriod} drilled in the
        period, {d.summary.lastDrillPassing} with a passing last drill, {d.summary.neverDrilled} never
        drilled. Fleet recovery-time estimate: {d.fleetRto.status}
        {d.fleetRto.seconds !== null ? ` (${seconds(d.fleetRto.seconds)})` : ''}.
      </p>
      <div className="table-wrap">
        <table>
          <caption className="visually-hidden">Restore drills per job</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Drills in period (pass / fail / error)</th>
              <th scope="col">Last drill</th>
              <th scope="col">Last pass</th>
              <th scope="col">Measured restore</th>
              <th scope="col">Recovery-time estimate</th>
            </tr>
          </thead>
          <tbody>
            {d.jobs.map((j) => (
              <tr key={j.job} data-job={j.job}>
                <th scope="row">{j.name ?? j.job}</th>
                <td>
                  {j.drillsInPeriod.pass} / {j.drillsInPeriod.fail} / {j.drillsInPeriod.error}
                </td>
                <td>
                  {j.lastDrill ? `${j.lastDrill.verdict}, ${formatTime(j.lastDrill.startedAt)}` : 'never'}
                </td>
                <td>{j.lastPass ? formatTime(j.lastPass.startedAt) : 'never'}</td>
                <td>{seconds(j.measuredRestoreSeconds)}</td>
                <td>
                  {j.rto.status}
                  {j.rto.seconds !== undefined && j.rto.seconds !== null
                    ? ` (${seconds(j.rto.seconds)})`
                    : ''}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

function Attestation({ d }: { d: AttestationData }) {
  const v = d.verification;
  return (
    <div className="table-wrap">
      <table>
        <caption className="visually-hidden">Audit chain attestation</caption>
        <tbody>
          <tr>
            <th scope="row">Chain</th>
            <td data-figure="chain">
              {v.ok ? '✓ intact' : `✗ BROKEN at seq ${v.firstBadSeq}: ${v.problem}`}
            </td>
          </tr>
          <tr>
            <th scope="row">Events checked</th>
            <td>{v.eventsChecked}</td>
          </tr>
          <tr>
            <th scope="row">Head</th>
            <td>{d.head ? `seq ${d.head.seq}, ${d.head.hash}` : '–'}</td>
          </tr>
          <tr>
            <th scope="row">Earliest retained seq</th>
            <td>{d.earliestSeq ?? '–'}</td>
          </tr>
          <tr>
            <th scope="row">Starts at genesis</th>
            <td>{d.anchored ? 'yes' : 'no: older events were pruned'}</td>
          </tr>
        </tbody>
      </table>
    </div>
  );
}

export function Figures({ body }: { body: ReportBody }) {
  switch (body.kind) {
    case 'backup-coverage':
      return <Coverage d={body.data} />;
    case 'restore-drills':
      return <Drills d={body.data} />;
    case 'audit-attestation':
      return <Attestation d={body.data} />;
  }
}
