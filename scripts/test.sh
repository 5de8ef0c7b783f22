#!/usr/bin/env bash
# The README's test command: installs what the build and tests need (scripts/setup.sh test), starts a
# throwaway PostgreSQL cluster for the PostgreSQL half of the suite (stopped again on exit), then runs
# `swift test`. Extra arguments go to `swift test` (e.g. --filter ImportTests).
# With CI=true a missing PostgreSQL is an error instead of a skipped half.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test

if [ -z "${VAULTSYNC_TEST_POSTGRES_URL:-}" ]; then
  if pgdir=$(mktemp -d "${TMPDIR:-/tmp}/vaultsync-test-pg.XXXXXX") && url=$(scripts/test-postgres.sh start "$pgdir"); then
    trap 'scripts/test-postgres.sh stop "$pgdir"; rm -rf "$pgdir"' EXIT
    export VAULTSYNC_TEST_POSTGRES_URL=$url
    echo "test: PostgreSQL for the tests at $url" >&2
  elif [ "${CI:-}" = true ]; then
    echo "test: CI needs PostgreSQL for the tests and it could not be started (see above)" >&2
    exit 1
  else
    echo "test: PostgreSQL could not be started; its half of the server tests is skipped" >&2
  fi
fi
swift test "$@"
