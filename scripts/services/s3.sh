#!/usr/bin/env bash
# The loopback S3-compatible server the tests use (the S3 object-store driver's real counterpart).
#   scripts/services/s3.sh install   apt-get install Ceph's S3 gateway (radosgw) and a one-node cluster's
#                                    daemons (ceph-mon, ceph-osd); idempotent, instant when present
#   scripts/services/s3.sh start     a fresh one-node Ceph cluster on 127.0.0.1 (mon, one memstore OSD,
#                                    radosgw on 127.0.0.1:47480) with one S3 user, daemonised, data and
#                                    logs under .test-services/s3/; settings written to
#                                    .test-services/s3.env (S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY_ID,
#                                    S3_SECRET_ACCESS_KEY, S3_KIND). When already running, it only
#                                    rewrites the settings file.
#   scripts/services/s3.sh stop      stops the daemons (the settings file is removed)
#   scripts/services/s3.sh status    exit 0 when the S3 endpoint answers
#
# Why radosgw: it checks request signatures, conditional writes (If-None-Match) and Object Lock for
# real, like AWS. The OSD keeps objects in memory (memstore), so every start is a clean cluster.
# Fallback: when radosgw is not installed (or COFFER_S3_SERVER=s3rver), start runs s3rver (npm,
# a devDependency of @coffer/testkit) instead and writes S3_KIND=s3rver; it ignores conditional
# writes, so the tests assert less against it.
# No bucket is created here: tests create their own (testkit createTestBucket).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
services="$root/.test-services"
dir="$services/s3"
envfile="$services/s3.env"
s3_port=${COFFER_S3_PORT:-47480}
mon_port=${COFFER_S3_MON_PORT:-46789}
region=us-east-1
conf="$dir/ceph.conf"
packages=(radosgw ceph-mon ceph-osd ceph-common)

find_bin() {
  command -v "$1" 2>/dev/null || { [ -x "/usr/bin/$1" ] && echo "/usr/bin/$1"; } || true
}

have_radosgw() {
  [ -n "$(find_bin radosgw)" ] && [ -n "$(find_bin ceph-mon)" ] && [ -n "$(find_bin ceph-osd)" ] &&
    [ -n "$(find_bin radosgw-admin)" ] && [ -n "$(find_bin ceph)" ] && [ -n "$(find_bin monmaptool)" ]
}

kind() {
  if [ "${COFFER_S3_SERVER:-}" = s3rver ] || ! have_radosgw; then echo s3rver; else echo radosgw; fi
}

answers() {
  # Any HTTP answer from the root (radosgw: 200 anonymous listing; s3rver: 403) means it is up.
  local code
  code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$s3_port/" 2>/dev/null || true)
  [ -n "$code" ] && [ "$code" != 000 ]
}

random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

write_env() {
  local tmp="$envfile.tmp.$$"
  # shellcheck disable=SC1091
  . "$dir/credentials"
  (umask 077 && cat > "$tmp" <<EOF
S3_ENDPOINT=http://127.0.0.1:$s3_port
S3_REGION=$region
S3_ACCESS_KEY_ID=$ACCESS_KEY_ID
S3_SECRET_ACCESS_KEY=$SECRET_ACCESS_KEY
S3_KIND=$KIND
EOF
  )
  mv -f "$tmp" "$envfile"
}

cmd_install() {
  if have_radosgw; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "s3.sh: radosgw is not installed and we are not root (apt-get install ${packages[*]}); start will use s3rver" >&2
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null 2>&1 || {
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  }
  have_radosgw || { echo "s3.sh: radosgw still missing after install" >&2; return 1; }
}

# True when the pid in file $1 is alive and its command line mentions $2 (a stale pid file must
# never make us signal an unrelated process that reused the number).
pid_alive() {
  [ -s "$1" ] || return 1
  local pid cmd
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  # Ours only: the process's command names this checkout's files (another checkout's daemon, or a
  # recycled pid, is never signalled).
  cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$2"* && $cmd == *"$dir/"* ]]
}

# Fails the start when something else listens on one of our ports: typically the test servers of
# another checkout of this repository (a clone being checked beside a working copy). Starting
# anyway used to end in the fallback "answering" with the other server, whose keys are not ours,
# so every S3 test failed with an unexplained error.
ports_free() {
  command -v ss >/dev/null 2>&1 || return 0
  local p held
  for p in "$s3_port" "$mon_port"; do
    held=$(ss -Hltnp "sport = :$p" 2>/dev/null | head -n 1 || true)
    if [ -n "$held" ]; then
      echo "s3.sh: 127.0.0.1:$p is already in use (another checkout's test servers?): $held" >&2
      echo "s3.sh: stop them (scripts/services/s3.sh stop in that checkout) or set COFFER_S3_PORT and COFFER_S3_MON_PORT" >&2
      return 1
    fi
  done
}

kill_pidfile() {
  local file=$1 name=$2 signal=${3:-TERM} pid
  if pid_alive "$file" "$name"; then
    pid=$(cat "$file")
    kill "-$signal" "$pid" 2>/dev/null || true
    # A zombie (reaped late by a container's init) has an empty cmdline: it counts as gone.
    for _ in $(seq 1 100); do
      [ -n "$(tr -d '\0' < "/proc/$pid/cmdline" 2>/dev/null)" ] || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop_all() {
  # Gateway first, then the OSD, then the monitor. The gateway and the OSD get SIGKILL: their
  # clean shutdown is slow (memstore would write every object to disk) and all data is thrown
  # away on the next start anyway.
  kill_pidfile "$dir/run/client.rgw.coffer.pid" radosgw KILL
  kill_pidfile "$dir/run/osd.0.pid" ceph-osd KILL
  kill_pidfile "$dir/run/mon.a.pid" ceph-mon
  kill_pidfile "$dir/s3rver.pid" s3rver
}

fail_start() {
  echo "s3.sh: $1" >&2
  for log in "$dir"/log/*.log "$dir/s3rver.log"; do
    [ -f "$log" ] && { echo "--- tail of $log" >&2; tail -n 15 "$log" >&2; }
  done
  return 1
}

start_radosgw() {
  local ceph=(ceph -c "$conf" --connect-timeout 10)
  rm -rf "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/monmap" "$dir/s3rver-data"
  mkdir -p "$dir/mon" "$dir/osd/osd.0" "$dir/run" "$dir/log"
  local fsid osd_uuid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  # Cluster-internal auth is off (loopback, one node); S3 request signatures are still checked by
  # radosgw against the user's keys.
  cat > "$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = 8589934592
osd class update on start = false
osd crush update on start = false
osd class dir = /usr/lib/x86_64-linux-gnu/rados-classes
erasure code dir = /usr/lib/x86_64-linux-gnu/ceph/erasure-code
plugin dir = /usr/lib/x86_64-linux-gnu/ceph
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
mon data = $dir/mon/\$name
osd data = $dir/osd/\$name
keyring = $dir/keyring
[client.rgw.coffer]
rgw frontends = beast endpoint=127.0.0.1:$s3_port
rgw data = $dir/rgw
rgw enable usage log = false
debug rgw = 0
EOF
  # Plugin paths are per architecture (x86_64-linux-gnu, aarch64-linux-gnu, ...).
  local libdir
  libdir=$(dirname "$(ls -d /usr/lib/*/rados-classes 2>/dev/null | head -n 1)")
  [ "$libdir" != . ] && sed -i "s#/usr/lib/x86_64-linux-gnu#$libdir#" "$conf"
  monmaptool --create --clobber --addv a "[v1:127.0.0.1:$mon_port]" --fsid "$fsid" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >/dev/null 2>&1 || fail_start "ceph-mon --mkfs failed" || return 1
  ceph-mon -c "$conf" -i a 9>&- || fail_start "ceph-mon did not start" || return 1
  "${ceph[@]}" osd new "$osd_uuid" >/dev/null || fail_start "ceph osd new failed" || return 1
  "${ceph[@]}" osd crush add osd.0 1.0 root=default host=localhost >/dev/null 2>&1 ||
    fail_start "ceph osd crush add failed" || return 1
  ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1 || fail_start "ceph-osd --mkfs failed" || return 1
  ceph-osd -c "$conf" -i 0 >/dev/null 2>&1 9>&- || fail_start "ceph-osd did not start" || return 1
  local up=
  for _ in $(seq 1 120); do
    if "${ceph[@]}" osd stat 2>/dev/null | grep -q '1 up'; then up=1; break; fi
    sleep 0.25
  done
  [ -n "$up" ] || fail_start "the OSD did not come up" || return 1
  mkdir -p "$dir/rgw"
  radosgw -c "$conf" -n client.rgw.coffer >/dev/null 2>&1 9>&- || fail_start "radosgw did not start" || return 1
  for _ in $(seq 1 240); do
    if answers; then break; fi
    sleep 0.25
  done
  answers || fail_start "radosgw did not answer on 127.0.0.1:$s3_port" || return 1
  local access secret
  access="COFFER$(random_hex 7 | tr 'a-f' 'A-F')"
  secret=$(random_hex 20)
  radosgw-admin -c "$conf" user create --uid=coffer-test --display-name="coffer tests" \
    --access-key="$access" --secret-key="$secret" >/dev/null 2>&1 ||
    fail_start "radosgw-admin user create failed" || return 1
  (umask 077 && printf 'KIND=radosgw\nACCESS_KEY_ID=%s\nSECRET_ACCESS_KEY=%s\n' "$access" "$secret" > "$dir/credentials")
}

start_s3rver() {
  local bin="$root/packages/testkit/node_modules/.bin/s3rver"
  [ -x "$bin" ] || fail_start "s3rver not installed (run pnpm install)" || return 1
  command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ] || {
    # shellcheck disable=SC1091
    . "$root/scripts/setup-tools.sh" >/dev/null
  }
  mkdir -p "$dir/s3rver-data"
  rm -rf "${dir:?}/s3rver-data/"*
  setsid nohup "$bin" -d "$dir/s3rver-data" -a 127.0.0.1 -p "$s3_port" --no-vhost-buckets --silent \
    > "$dir/s3rver.log" 2>&1 < /dev/null 9>&- &
  echo $! > "$dir/s3rver.pid"
  for _ in $(seq 1 100); do
    if answers; then break; fi
    sleep 0.1
  done
  answers || fail_start "s3rver did not answer on 127.0.0.1:$s3_port" || return 1
  # s3rver's fixed default credentials.
  (umask 077 && printf 'KIND=s3rver\nACCESS_KEY_ID=S3RVER\nSECRET_ACCESS_KEY=S3RVER\n' > "$dir/credentials")
}

running() {
  [ -s "$dir/credentials" ] || return 1
  answers || return 1
  if grep -q '^KIND=radosgw' "$dir/credentials"; then
    pid_alive "$dir/run/client.rgw.coffer.pid" radosgw && pid_alive "$dir/run/osd.0.pid" ceph-osd &&
      pid_alive "$dir/run/mon.a.pid" ceph-mon
  else
    pid_alive "$dir/s3rver.pid" s3rver
  fi
}

cmd_start() {
  mkdir -p "$dir"
  # Serialise concurrent starts (several test files may ask at once).
  exec 9>"$dir/.lock"
  flock 9
  if running; then write_env; return 0; fi
  stop_all
  rm -f "$dir/credentials" "$envfile"
  ports_free || exit 1
  local started=$SECONDS
  if [ "$(kind)" = radosgw ]; then
    if ! start_radosgw; then
      echo "s3.sh: WARNING: radosgw failed to start; falling back to s3rver (fewer checks)" >&2
      stop_all
      start_s3rver
    fi
  else
    start_s3rver
  fi
  write_env
  echo "s3.sh: $(grep '^KIND=' "$dir/credentials" | cut -d= -f2) on 127.0.0.1:$s3_port ready in $((SECONDS - started))s" >&2
}

cmd_stop() {
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
  rm -f "$envfile"
  stop_all
  rm -f "$dir/credentials"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) answers ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
