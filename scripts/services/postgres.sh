#!/usr/bin/env bash
# The loopback PostgreSQL server the tests use (the @coffer/state PostgreSQL backend's real
# counterpart, and the shared state of multi-replica engine tests).
#   scripts/services/postgres.sh install   apt-get install postgresql (Debian 12: 15); idempotent,
#                                          instant when present; never creates Debian's own cluster
#   scripts/services/postgres.sh start     our own cluster under .test-services/pg, listening on
#                                          127.0.0.1:54329 only, role `coffer` (LOGIN CREATEDB) with
#                                          a per-checkout random password; settings written to
#                                          .test-services/postgres.env
#                                          (POSTGRES_URL=postgres://coffer:pw@127.0.0.1:54329/postgres)
#   scripts/services/postgres.sh stop      stops that server (the settings file is removed)
#   scripts/services/postgres.sh status    exit 0 when it accepts connections
# Root cannot run postgres: as root the cluster belongs to the `postgres` system user (runuser);
# as any other user it belongs to that user. Durability settings are off (fsync, full-page
# writes): it is a throw-away test server, and the tests never power-cycle it.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
port=${COFFER_POSTGRES_PORT:-54329}
services="$root/.test-services"
data="$services/pg"
# As root the cluster belongs to `postgres`, which must be able to reach the data directory; a
# clone under a private home (e.g. /root, mode 0700) is not reachable, so the cluster then lives in
# a per-checkout directory under /var/tmp instead (same name for start and stop).
pick_data() {
  if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && ! runuser -u postgres -- test -x "$root" 2>/dev/null; then
    data="/var/tmp/coffer-test-pg-$(printf '%s' "$root" | sha256sum | cut -c1-12)"
  fi
}
pick_data
envfile="$services/postgres.env"
pwfile="$services/pg-password"

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/pg_ctl" ] && echo "$d"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

password() {
  mkdir -p "$services"
  if [ ! -s "$pwfile" ]; then
    # A per-checkout random password: the tests prove it never leaks into error messages.
    (umask 077 && od -An -N18 -tx1 /dev/urandom | tr -d ' \n' > "$pwfile")
  fi
  cat "$pwfile"
}

ready() {
  local bin
  bin=$(pg_bin) || return 1
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 2 >/dev/null 2>&1
}

write_env() {
  local pw tmp="$envfile.tmp.$$"
  pw=$(password)
  (umask 077 && {
    printf 'POSTGRES_URL=postgres://coffer:%s@127.0.0.1:%s/postgres\n' "$pw" "$port"
    printf 'POSTGRES_HOST=127.0.0.1\nPOSTGRES_PORT=%s\nPOSTGRES_USER=coffer\nPOSTGRES_PASSWORD=%s\n' "$port" "$pw"
  } > "$tmp")
  mv -f "$tmp" "$envfile"
}

cmd_install() {
  if pg_bin >/dev/null; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "postgres.sh: PostgreSQL is not installed and we are not root (apt-get install postgresql)" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Keep the package from creating and starting Debian's default cluster on 5432: ours is separate.
  mkdir -p /etc/postgresql-common
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf
  fi
  local opts=(-y -qq --no-install-recommends -o Dpkg::Options::=--force-confold)
  apt-get install "${opts[@]}" postgresql >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install "${opts[@]}" postgresql >/dev/null
  }
  pg_bin >/dev/null || { echo "postgres.sh: pg_ctl still missing after install" >&2; return 1; }
}

psql_owner() {
  local bin
  bin=$(pg_bin)
  # Local socket in the data directory with trust for the cluster owner only (see pg_hba below).
  as_owner "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$data" -p "$port" -d postgres "$@"
}

cmd_start() {
  mkdir -p "$services"
  # Serialise concurrent starts (several test files may ask at once).
  exec 9>"$services/.pg.lock"
  flock 9
  if ready && [ -s "$envfile" ]; then return 0; fi
  local bin
  bin=$(pg_bin) || cmd_install
  bin=$(pg_bin) || { echo "postgres.sh: PostgreSQL not installed (run: scripts/services/postgres.sh install)" >&2; return 1; }
  pick_data # the postgres user may only exist now
  local pw
  pw=$(password)
  if [ ! -s "$data/PG_VERSION" ]; then
    rm -rf "$data"
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$data"
    chmod 700 "$data"
    as_owner "$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      -E UTF8 --locale=C.UTF-8 >/dev/null
    as_owner sh -c "cat >> '$data/postgresql.conf'" <<EOF
# Coffer test server (scripts/services/postgres.sh)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data'
max_connections = 300
password_encryption = 'scram-sha-256'
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
EOF
    # Loopback TCP needs the password; the socket (inside the 0700 data dir) trusts the owner.
    as_owner sh -c "cat > '$data/pg_hba.conf'" <<EOF
local all postgres trust
host all all 127.0.0.1/32 scram-sha-256
EOF
  fi
  if ! ready; then
    # A stale pid file from a killed server makes pg_ctl refuse to start.
    if ! as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then rm -f "$data/postmaster.pid"; fi
    # The server must inherit no descriptor but its log: an inherited lock fd would hold the
    # start lock forever, and an inherited pipe would keep a caller waiting for EOF.
    (
      for fd in $(ls /proc/$BASHPID/fd); do
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
      done
      as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start </dev/null >/dev/null 2>&1
    ) || { echo "postgres.sh: pg_ctl start failed (see $data/server.log)" >&2; return 1; }
  fi
  for _ in $(seq 1 100); do
    if ready; then break; fi
    sleep 0.1
  done
  ready || { echo "postgres.sh: PostgreSQL did not answer on 127.0.0.1:$port (see $data/server.log)" >&2; return 1; }
  psql_owner <<EOF
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'coffer') THEN
    CREATE ROLE coffer LOGIN CREATEDB PASSWORD '$pw';
  ELSE
    ALTER ROLE coffer LOGIN CREATEDB PASSWORD '$pw';
  END IF;
END
\$\$;
EOF
  write_env
}

cmd_stop() {
  rm -f "$envfile"
  local bin
  bin=$(pg_bin) || return 0
  if [ -s "$data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  fi
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) ready ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
