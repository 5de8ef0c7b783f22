#!/usr/bin/env bash
# Usage: scripts/stall-report.sh MINUTES [LOG]
# Waits MINUTES, then, if the test process (VaultSyncPackageTests) is still running, prints every thread's
# stack (gdb) and stops it, so that a stalled run ends with a diagnosis instead of running into CI's time
# limit with nothing to read. .ci/run starts it beside the tests and stops it when they end.
# With LOG (the tests' output, as scripts/test.sh keeps it), the tests that started and never ended are
# named last: a CI report shows only its tail, and a hung test awaits in a task, which no thread's stack
# shows.
# docs/RELIABILITY.md, "the suite, run after run".
set -uo pipefail
minutes=${1:?usage: scripts/stall-report.sh MINUTES [LOG]}
log=${2:-}
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
if [ -n "$log" ] && [ -r "$log" ]; then
  # Swift Testing's lines: "◇ Test NAME started." then "✔ Test NAME passed after …" or "✘ Test NAME failed …".
  echo "stall-report: tests that started and have not ended:" >&2
  awk '
    /^◇ Test case passing / || /^◇ Test run started/ { next }
    /^◇ Test .* started\.$/ { name = $0; sub(/^◇ Test /, "", name); sub(/ started\.$/, "", name); open[name] = 1; next }
    /^(✔|✘) Test / { for (n in open) if (index($0, "Test " n " ") > 0 && $0 !~ /recorded an issue/) delete open[n] }
    END { for (n in open) print "  " n }
  ' "$log" >&2
fi
echo "stall-report: stopping the test process" >&2
kill $pids 2>/dev/null || true
