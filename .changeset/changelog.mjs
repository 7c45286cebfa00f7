// The changelog lines `changeset version` writes into each package's CHANGELOG.md (config.json
// "changelog"). Like the default generator, but for readers of the package rather than of this
// repository: no commit hashes, and one plain line naming the Coffer packages it now requires
// instead of one "Updated dependencies [hash]" line per changeset. Needs no network.

/** One changeset's summary as a list item (its further paragraphs indented under it). */
function getReleaseLine(changeset) {
  const [first, ...rest] = changeset.summary.split('\n').map((line) => line.trimEnd());
  return rest.length === 0
    ? `- ${first}`
    : `- ${first}\n${rest.map((line) => (line === '' ? '' : `  ${line}`)).join('\n')}`;
}

/** The workspace dependencies bumped with this release, in one line. */
function getDependencyReleaseLine(_changesets, dependenciesUpdated) {
  if (dependenciesUpdated.length === 0) return '';
  const list = dependenciesUpdated.map((d) => `\`${d.name}\` ${d.newVersion}`).join(', ');
  return `- Requires ${list}.`;
}

export default { getReleaseLine, getDependencyReleaseLine };
