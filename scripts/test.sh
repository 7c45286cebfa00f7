#!/usr/bin/env bash
# The README's test command: installs and starts the loopback test servers (PostgreSQL, Redis,
# an S3-compatible store) when run as root on Debian, makes sure the workspace is installed and
# built, then runs every package's tests. Ends with `N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup-tools.sh
export DEBIAN_FRONTEND=noninteractive
if ls scripts/services/*.sh >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && [ -z "${COFFER_SKIP_APT:-}" ]; then
    apt-get update -qq >/dev/null 2>&1 || echo "test.sh: apt-get update failed; using what is installed" >&2
  fi
  for svc in scripts/services/*.sh; do bash "$svc" install; done
  for svc in scripts/services/*.sh; do bash "$svc" start; done
fi
if [ ! -d node_modules ]; then pnpm install --frozen-lockfile --reporter=append-only | tail -n 3; fi
if [ -z "${COFFER_SKIP_BUILD:-}" ]; then pnpm build --output-logs=errors-only >/dev/null; fi
# tap compiles its plugin set on `tap build`; a fresh install still has the default set, which
# loads ts-node. Ours (root package.json "tap".plugin) drops it: Node 24 strips the types itself.
node_modules/.bin/tap build >/dev/null
mkdir -p .tap
set +e
node scripts/test-all.mjs "$@"
status=$?
set -e
exit "$status"
