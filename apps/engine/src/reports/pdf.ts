/**
 * The PDF form of a report (`?format=pdf`, docs/reports.md "PDF"): the same body rendered with
 * pdf-lib and its built-in standard fonts (Helvetica; their metrics are compiled into the library,
 * so nothing is read from disk at run time and the release bundle carries it whole).
 *
 * A PDF carries no checkable signature (specification "Jobs and runs"): its first page says so in
 * a line of its own and names the JSON route that returns the signed form. Text outside the
 * standard fonts' WinAnsi repertoire (a job name in another script) is printed as `?`; the signed
 * JSON keeps it exactly.
 */
// pdf-lib is loaded with the first report: about 3 MiB of heap that an engine making none need
// not hold.
import type { PDFDocument, PDFFont, PDFPage } from 'pdf-lib';
import type { AuditAttestationData } from './audit.ts';
import type { CoverageData } from './coverage.ts';
import type { DrillsData } from './drills.ts';
import type { KnownReport, ReportKind } from './kinds.ts';

const PAGE = { width: 595.28, height: 841.89 } as const; // A4 in points
const MARGIN = 50;
const SIZE = 10;
const LEADING = 14;

/** The sentence every PDF carries (tests look for it). */
export function noSignatureLine(kind: string): string {
  return `This PDF carries no checkable signature. For the signed form fetch GET /admin/reports/${kind} (JSON) and check it with coffer-recover verify-report.`;
}

/** Characters the standard fonts can encode (printable ASCII and Latin-1); anything else is `?`. */
function printable(text: string): string {
  return text.replace(/[^\x20-\x7e\xa0-\xff]/g, '?');
}

function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return 'unknown';
  let s = Math.round(seconds);
  const d = Math.floor(s / 86_400);
  s -= d * 86_400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [d ? `${d}d` : '', h ? `${h}h` : '', m ? `${m}m` : '', s || (!d && !h && !m) ? `${s}s` : ''];
  return parts.filter(Boolean).join(' ');
}

/** A top-to-bottom text writer that wraps lines and starts new pages. */
class Writer {
  private readonly doc: PDFDocument;
  private readonly rgb: typeof import('pdf-lib').rgb;
  private readonly regular: PDFFont;
  private readonly bold: PDFFont;
  private page: PDFPage;
  private y: number;
  constructor(doc: PDFDocument, rgb: typeof import('pdf-lib').rgb, regular: PDFFont, bold: PDFFont) {
    this.doc = doc;
    this.rgb = rgb;
    this.regular = regular;
    this.bold = bold;
    this.page = doc.addPage([PAGE.width, PAGE.height]);
    this.y = PAGE.height - MARGIN;
  }

  private wrap(text: string, font: PDFFont, size: number, width: number): string[] {
    const out: string[] = [];
    let current = '';
    for (const word of printable(text).split(' ')) {
      const next = current === '' ? word : `${current} ${word}`;
      if (font.widthOfTextAtSize(next, size) <= width || current === '') current = next;
      else {
        out.push(current);
        current = word;
      }
    }
    out.push(current);
    // A single word wider than the line (a hash) is cut by characters.
    return out.flatMap((l) => {
      const pieces: string[] = [];
      let rest = l;
      while (font.widthOfTextAtSize(rest, size) > width && rest.length > 1) {
        let n = rest.length - 1;
        while (n > 1 && font.widthOfTextAtSize(rest.slice(0, n), size) > width) n--;
        pieces.push(rest.slice(0, n));
        rest = rest.slice(n);
      }
      pieces.push(rest);
      return pieces;
    });
  }

  text(
    text: string,
    o: { bold?: boolean; size?: number; indent?: number; color?: [number, number, number] } = {},
  ): void {
    const size = o.size ?? SIZE;
    const font = o.bold ? this.bold : this.regular;
    const indent = o.indent ?? 0;
    const leading = Math.max(LEADING, size * 1.35);
    for (const l of this.wrap(text, font, size, PAGE.width - 2 * MARGIN - indent)) {
      if (this.y - leading < MARGIN) {
        this.page = this.doc.addPage([PAGE.width, PAGE.height]);
        this.y = PAGE.height - MARGIN;
      }
      this.y -= leading;
      this.page.drawText(l, {
        x: MARGIN + indent,
        y: this.y,
        size,
        font,
        color: o.color ? this.rgb(...o.color) : this.rgb(0, 0, 0),
      });
    }
  }

  gap(points = LEADING / 2): void {
    this.y -= points;
  }
}

function coverage(w: Writer, data: CoverageData): void {
  const s = data.summary;
  w.text(
    `Summary: ${s.jobs} job(s): ${s.covered} covered, ${s.stale} stale, ${s.neverRun} never run (evaluated at ${data.evaluatedAt}).`,
  );
  for (const j of data.jobs) {
    w.gap();
    w.text(`Job ${j.job}${j.name ? ` (${j.name})` : ''}: ${j.verdict.toUpperCase()}`, {
      bold: true,
      size: 12,
    });
    w.text(
      `Source ${j.sourceType}; ${j.enabled ? 'enabled' : 'paused'}; every ${duration(j.schedule.cadenceSeconds)}, stale after ${duration(j.schedule.staleAfterSeconds)}.`,
      { indent: 10 },
    );
    w.text(
      j.lastSuccess
        ? `Last successful run ${j.lastSuccess.runId}, finished ${j.lastSuccess.finishedAt ?? j.lastSuccess.startedAt} (age ${duration(j.lastSuccess.ageSeconds)}).`
        : 'No successful run.',
      { indent: 10 },
    );
    for (const d of j.destinations) {
      const last = d.lastVerified ? `last verified copy ${d.lastVerified.runId}` : 'no verified copy';
      w.text(
        `Destination ${d.id}: latest copy ${d.state}${d.reason ? ` (${d.reason})` : ''}; ${last}; ${d.verifiedCopies} verified copies retained.`,
        { indent: 10 },
      );
    }
    const r = j.retention;
    const rule = [r.keepLast ? `keep last ${r.keepLast}` : '', r.keepDays ? `keep ${r.keepDays} days` : '']
      .filter(Boolean)
      .join(', ');
    w.text(
      `Retention: ${rule || 'no rule (keep all)'}; retained window: ${j.retained ? `${j.retained.count} run(s), ${j.retained.oldest} to ${j.retained.newest}` : 'empty'}.`,
      { indent: 10 },
    );
    const p = j.runsInPeriod;
    w.text(`Runs in the period: ${p.total} (${p.ok} ok, ${p.failed} failed, ${p.other} other).`, {
      indent: 10,
    });
  }
}

function drills(w: Writer, data: DrillsData): void {
  const s = data.summary;
  w.text(
    `Summary: ${s.jobs} job(s); ${s.drilledInPeriod} drilled in the period; last drill passing for ${s.lastDrillPassing}; never drilled: ${s.neverDrilled}.`,
  );
  w.text(
    `Fleet recovery-time estimate: ${data.fleetRto.status}${data.fleetRto.seconds === null ? '' : `, ${duration(data.fleetRto.seconds)}`}${data.fleetRto.jobsUnknown.length ? ` (unknown for ${data.fleetRto.jobsUnknown.join(', ')})` : ''}.`,
  );
  for (const j of data.jobs) {
    w.gap();
    const verdict = j.lastDrill ? j.lastDrill.verdict.toUpperCase() : 'NEVER DRILLED';
    w.text(`Job ${j.job}${j.name ? ` (${j.name})` : ''}: ${verdict}`, { bold: true, size: 12 });
    w.text(
      `Restore-test cadence: ${j.restoreTestCadenceSeconds === null ? 'none' : duration(j.restoreTestCadenceSeconds)}. Measured restore time (last passing drill): ${duration(j.measuredRestoreSeconds)}. RTO estimate: ${j.rto.status}${j.rto.seconds === undefined ? '' : `, ${duration(j.rto.seconds)}`}.`,
      { indent: 10 },
    );
    const p = j.drillsInPeriod;
    w.text(`Drills in the period: ${p.total} (${p.pass} pass, ${p.fail} fail, ${p.error} error).`, {
      indent: 10,
    });
    for (const d of p.listed) {
      w.text(
        `${d.startedAt}  ${d.verdict}  ${d.trigger}  run ${d.runId}  ${d.records} records, ${d.bytes} bytes, ${duration(d.durationMs / 1000)}${d.mismatched ? `, ${d.mismatched} mismatched` : ''}${d.reason ? ` (${d.reason})` : ''}`,
        { indent: 20, size: 9 },
      );
    }
  }
}

function audit(w: Writer, data: AuditAttestationData): void {
  w.text(`Chain head: seq ${data.head.seq}, hash ${data.head.hash}`);
  w.text(
    `Earliest retained seq: ${data.earliestSeq ?? 'none'}; ${data.anchored ? 'anchored at genesis' : 'older events pruned (unanchored)'}.`,
  );
  const v = data.verification;
  w.gap();
  if (v.ok) {
    w.text(`Verification: CHAIN INTACT (${v.eventsChecked} events recomputed).`, { bold: true, size: 12 });
  } else {
    w.text(`Verification: CHAIN BROKEN at seq ${v.firstBadSeq} (${v.problem}).`, {
      bold: true,
      size: 12,
      color: [0.7, 0, 0],
    });
    w.text(v.message, { indent: 10 });
    w.text(
      `${v.eventsChecked} events verified before the break; last good: ${v.lastGood ? `seq ${v.lastGood.seq}` : 'none'}.`,
      { indent: 10 },
    );
  }
}

export const REPORT_TITLES: Record<ReportKind, string> = {
  'backup-coverage': 'Backup coverage',
  'restore-drills': 'Restore-drill evidence and recovery time',
  'audit-attestation': 'Audit chain attestation',
};

/** Renders the report body as PDF bytes. Throws only on a pdf-lib failure (an engine bug). */
export async function renderReportPdf(body: KnownReport): Promise<Uint8Array> {
  const { PDFDocument, rgb, StandardFonts } = await import('pdf-lib');
  const doc = await PDFDocument.create();
  const title = `Coffer report: ${REPORT_TITLES[body.kind]}`;
  doc.setTitle(title);
  doc.setSubject(`${body.kind}, ${body.period.from} to ${body.period.to}`);
  doc.setProducer('coffer-engine');
  doc.setCreator(`coffer-engine ${body.engineVersion}`);
  doc.setCreationDate(new Date(body.generatedAt));
  doc.setModificationDate(new Date(body.generatedAt));
  const w = new Writer(
    doc,
    rgb,
    await doc.embedFont(StandardFonts.Helvetica),
    await doc.embedFont(StandardFonts.HelveticaBold),
  );
  w.text(title, { bold: true, size: 16 });
  w.gap();
  w.text(noSignatureLine(body.kind), { bold: true, color: [0.7, 0, 0] });
  w.gap();
  w.text(`Generated ${body.generatedAt} by coffer-engine ${body.engineVersion}.`);
  w.text(`Period: ${body.period.from} to ${body.period.to}.`);
  w.text(`Engine signer (of the JSON form): ${body.signerFingerprint}`);
  w.gap();
  switch (body.kind) {
    case 'backup-coverage':
      coverage(w, body.data);
      break;
    case 'restore-drills':
      drills(w, body.data);
      break;
    case 'audit-attestation':
      audit(w, body.data);
      break;
  }
  return doc.save();
}
