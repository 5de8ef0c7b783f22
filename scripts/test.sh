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
# Foundation's Process.run() (Swift 6.3.1) copies each /proc/self/fd entry's 256-byte name field whole,
# reading past the end of glibc's readdir buffer (fixed upstream in swift-corelibs-foundation PR #5472,
# not in this toolchain). The test process spawns hundreds of children from threads of its own, whose
# malloc arenas grow page by page, so the buffer can end right before an unmapped page: a SIGSEGV in
# Process.run about once in a few full runs. One arena (the main heap, which grows with 128 KiB of
# padding) leaves mapped memory after the buffer. docs/RELIABILITY.md, "flakes".
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.arena_max=1"
# At most 8 test cases run at once. Uncapped, Swift Testing starts all of them together (500 and more),
# and on a 2-core machine their servers, logins and CLI children starved each other: requests waited
# past the clients' 15-30 s timeouts in the run's first minutes. The cap (Swift Testing 6.3's own
# setting) costs no wall time: the long tests still run side by side. docs/RELIABILITY.md, "the suite,
# run after run".
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}"
# The tests' progress lines (print) go to stdout; line-buffered, a CI log shows them when they happen,
# not when a 4 KiB buffer fills (or never, if the run is stopped).
# (No exec: the trap above stops PostgreSQL when the tests end.)
# A copy of the output is kept so that, when the run fails, the failing tests' lines are printed again at the
# very end: a CI report that shows only a run's last lines then still names what failed (RELIABILITY bug 67: a red run
# whose tail said only "failed with 2 issues").
# VAULTSYNC_TEST_LOG names the copy and keeps it (.ci/run gives it to scripts/stall-report.sh).
log=${VAULTSYNC_TEST_LOG:-$(mktemp "${TMPDIR:-/tmp}/vaultsync-test-log.XXXXXX")}
buffered=()
if command -v stdbuf >/dev/null 2>&1; then buffered=(stdbuf -oL); fi
status=0
"${buffered[@]}" swift test "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "test: swift test failed (exit $status); what failed, again:"
  grep -E -A4 'recorded an issue|✘ Test .* failed|error: |Fatal error|signal code|Test Case .* failed' "$log" | grep -v '^--$' | tail -n 120 || true
fi
[ -n "${VAULTSYNC_TEST_LOG:-}" ] || rm -f "$log"
exit "$status"
