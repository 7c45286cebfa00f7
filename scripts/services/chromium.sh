#!/usr/bin/env bash
# Debian's Chromium for the browser tests (driven by playwright-core with executablePath; passkeys
# through the DevTools virtual authenticator). Not a server: "start" only records where it is.
#   scripts/services/chromium.sh install   apt-get install chromium (idempotent; instant when present)
#   scripts/services/chromium.sh start     writes .test-services/chromium.env (CHROMIUM_PATH=...)
#   scripts/services/chromium.sh stop      removes that file
#   scripts/services/chromium.sh status    exit 0 when the binary runs
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
services="$root/.test-services"
envfile="$services/chromium.env"

find_bin() {
  command -v chromium 2>/dev/null || { [ -x /usr/bin/chromium ] && echo /usr/bin/chromium; } || true
}

case "${1:-}" in
  install)
    if [ -z "$(find_bin)" ]; then
      if [ "$(id -u)" != 0 ]; then
        echo "chromium.sh: chromium is not installed and this is not root: apt-get install chromium" >&2
        exit 1
      fi
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    fi
    ;;
  start)
    bin=$(find_bin)
    [ -n "$bin" ] || { echo "chromium.sh: chromium not installed (run: $0 install)" >&2; exit 1; }
    mkdir -p "$services"
    echo "CHROMIUM_PATH=$bin" > "$envfile"
    echo "chromium.sh: $("$bin" --version 2>/dev/null | head -1) at $bin"
    ;;
  stop)
    rm -f "$envfile"
    ;;
  status)
    bin=$(find_bin)
    [ -n "$bin" ] && "$bin" --version >/dev/null 2>&1
    ;;
  *)
    echo "usage: $0 install|start|stop|status" >&2
    exit 2
    ;;
esac
