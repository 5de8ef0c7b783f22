#!/usr/bin/env bash
# Usage: scripts/stall-report.sh MINUTES
# Waits MINUTES, then, if the test process (VaultSyncPackageTests) is still running, prints every thread's
# stack (gdb) and stops it, so that a stalled run ends with a diagnosis instead of running into CI's time
# limit with nothing to read. .ci/run starts it beside the tests and stops it when they end.
# docs/RELIABILITY.md, "the suite, run after run".
set -uo pipefail
minutes=${1:?usage: scripts/stall-report.sh MINUTES}
# Only this checkout's test process (swift test runs it in the package's folder): another checkout's
# tests on the same machine are left alone.
root=$(pwd -P)
sleep $((minutes * 60))
pids=""
for pid in $(pgrep -f 'VaultSyncPackageTests' || true); do
  [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$root" ] && pids="$pids $pid"
done
[ -z "$pids" ] && exit 0
echo "stall-report: the tests are still running after $minutes minutes; every thread's stack follows" >&2
for pid in $pids; do
  if command -v gdb >/dev/null 2>&1; then
    gdb -p "$pid" -batch -ex 'set pagination off' -ex 'thread apply all bt 30' 2>&1 | grep -v '^\[New LWP' >&2 || true
  else
    echo "stall-report: gdb is not installed; no stacks" >&2
  fi
done
echo "stall-report: stopping the test process" >&2
kill $pids 2>/dev/null || true
