/**
 * Reads tables out of the repository's markdown documents, for the tests that keep a document
 * (docs/errors.md, docs/security-model.md, docs/audit.md, docs/jobs.md, ...) in step with code.
 * Cell padding is ignored (formatters align tables) and one pair of backticks around a cell's
 * whole text is removed.
 */

/** The cells of one `| a | b |` table line, trimmed, with surrounding backticks removed. */
export function markdownCells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => c.trim().replace(/^`([^`]*)`$/, '$1'));
}

/**
 * The first table in `markdown` whose header row starts with the cells `headerStart`: its header
 * cells and its body rows (the separator line is skipped). Throws when there is no such table, so
 * a renamed heading fails the test rather than matching nothing.
 */
export function markdownTable(
  markdown: string,
  headerStart: readonly string[],
): { header: string[]; rows: string[][] } {
  const lines = markdown.split('\n');
  const at = lines.findIndex(
    (l) => l.startsWith('|') && headerStart.every((h, i) => markdownCells(l)[i] === h),
  );
  if (at < 0) throw new Error(`markdown table not found: | ${headerStart.join(' | ')} |`);
  const rows: string[][] = [];
  for (let i = at + 2; i < lines.length && lines[i]!.startsWith('|'); i++)
    rows.push(markdownCells(lines[i]!));
  return { header: markdownCells(lines[at]!), rows };
}
