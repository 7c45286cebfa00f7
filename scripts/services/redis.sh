#!/usr/bin/env bash
# The loopback Redis server the tests use (the `redis` source connector's real counterpart).
#   scripts/services/redis.sh install   apt-get install redis-server (idempotent; instant when present)
#   scripts/services/redis.sh start     redis-server on 127.0.0.1:63790 with a password, daemonised,
#                                       data under .test-services/redis/, settings written to
#                                       .test-services/redis.env (REDIS_URL=redis://:pw@127.0.0.1:63790)
#   scripts/services/redis.sh stop      shuts that server down (the settings file is removed)
#   scripts/services/redis.sh status    exit 0 when it answers PING
# Our own port (63790), config file and data directory, so the Debian redis-server service that the
# package may auto-start on 6379 never conflicts with it (and is never touched by us).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
port=${COFFER_REDIS_PORT:-63790}
services="$root/.test-services"
dir="$services/redis"
envfile="$services/redis.env"

find_bin() {
  # Debian installs into /usr/bin; PATH may be narrowed by callers.
  command -v "$1" 2>/dev/null || { [ -x "/usr/bin/$1" ] && echo "/usr/bin/$1"; } || true
}

password() {
  mkdir -p "$dir"
  if [ ! -s "$dir/password" ]; then
    # A per-checkout random password: the tests must prove it never leaks into error messages.
    (umask 077 && od -An -N18 -tx1 /dev/urandom | tr -d ' \n' > "$dir/password")
  fi
  cat "$dir/password"
}

ping() {
  local cli
  cli=$(find_bin redis-cli)
  [ -n "$cli" ] || return 1
  [ "$(REDISCLI_AUTH="$(password)" "$cli" -h 127.0.0.1 -p "$port" --no-auth-warning ping 2>/dev/null)" = PONG ]
}

write_env() {
  local tmp="$envfile.tmp.$$"
  (umask 077 && printf 'REDIS_URL=redis://:%s@127.0.0.1:%s\n' "$(password)" "$port" > "$tmp")
  mv -f "$tmp" "$envfile"
}

cmd_install() {
  if [ -n "$(find_bin redis-server)" ] && [ -n "$(find_bin redis-cli)" ]; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "redis.sh: redis-server is not installed and we are not root (apt-get install redis-server)" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  }
  [ -n "$(find_bin redis-server)" ] || { echo "redis.sh: redis-server still missing after install" >&2; return 1; }
}

cmd_start() {
  mkdir -p "$dir"
  # Serialise concurrent starts (several test files may ask at once).
  exec 9>"$dir/.lock"
  flock 9
  if ping; then write_env; return 0; fi
  local server
  server=$(find_bin redis-server)
  [ -n "$server" ] || { echo "redis.sh: redis-server not installed (run: scripts/services/redis.sh install)" >&2; return 1; }
  local pw
  pw=$(password)
  (umask 077 && cat > "$dir/redis.conf" <<EOF
bind 127.0.0.1
port $port
protected-mode yes
requirepass $pw
daemonize yes
pidfile $dir/redis.pid
logfile $dir/redis.log
dir $dir
databases 32
save ""
appendonly no
EOF
  )
  # The daemon must not inherit the lock (fd 9) or our stdio, or it would hold them forever.
  "$server" "$dir/redis.conf" </dev/null >/dev/null 2>&1 9>&-
  for _ in $(seq 1 100); do
    if ping; then write_env; return 0; fi
    sleep 0.1
  done
  echo "redis.sh: redis-server did not answer on 127.0.0.1:$port (see $dir/redis.log)" >&2
  return 1
}

cmd_stop() {
  rm -f "$envfile"
  if [ -s "$dir/redis.pid" ]; then
    local pid
    pid=$(cat "$dir/redis.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$dir/redis.pid"
  fi
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) ping ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
