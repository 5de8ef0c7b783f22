#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster on a free loopback port, for the test suite.
#   scripts/test-postgres.sh start DIR   → prints the admin URL to export as VAULTSYNC_TEST_POSTGRES_URL
#   scripts/test-postgres.sh stop DIR
set -euo pipefail
action=${1:?start or stop}
dir=${2:?directory for the cluster}

# The server binaries: Debian's versioned folder, Homebrew's keg, or PATH.
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgbin" ] && command -v brew >/dev/null 2>&1 && [ -d "$(brew --prefix postgresql@17 2>/dev/null)/bin" ]; then
  pgbin="$(brew --prefix postgresql@17)/bin"
fi
if [ -z "$pgbin" ] && command -v initdb >/dev/null 2>&1; then pgbin=$(dirname "$(command -v initdb)"); fi
[ -n "$pgbin" ] || { echo "PostgreSQL server binaries not found (Debian: apt-get install postgresql)" >&2; exit 1; }

# initdb refuses to run as root: as root, the cluster belongs to the postgres user.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$action" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
      id postgres >/dev/null 2>&1 || { echo "running as root needs a postgres user to own the cluster" >&2; exit 1; }
      chown postgres "$dir"
    fi
    as_owner "$pgbin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
      || { echo "initdb failed; see $dir/initdb.log" >&2; exit 1; }
    # A port nobody answers on; pg_ctl fails if another process takes it first, then the next is tried.
    for _ in 1 2 3 4 5 6 7 8; do
      port=$((20000 + RANDOM % 40000))
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
      if as_owner "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200" \
        start >/dev/null; then
        echo "postgres://postgres@127.0.0.1:$port/postgres"
        exit 0
      fi
    done
    echo "PostgreSQL did not start; see $dir/server.log" >&2
    exit 1
    ;;
  stop)
    as_owner "$pgbin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2; exit 64
    ;;
esac
