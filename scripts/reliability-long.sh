#!/usr/bin/env bash
# The long mode of the reliability tests (docs/RELIABILITY.md): 10,000 operations under 30% faults,
# 1,000 SIGKILLs, 100,000 simulation seeds (two lanes side by side). Every size can be changed with
# the variables listed in that document, e.g.
# `VAULTSYNC_SIM_SEEDS=20000 VAULTSYNC_SIM_FIRST_SEED=20001 scripts/reliability-long.sh SimulationTests`
# runs one slice of the seeds only. The argument (default: all three) is a test filter.
# Built optimized (the test code is the same; a seed runs several times faster than in a debug build).
# The full output goes to reliability-long.log (or $VAULTSYNC_LONG_LOG).
set -euo pipefail
cd "$(dirname "$0")/.."
log="${VAULTSYNC_LONG_LOG:-reliability-long.log}"
filter="${1:-VaultReliabilityTests}"
flags=(-c release -Xswiftc -enable-testing)
# VAULTSYNC_LONG_SCRATCH=.build-release builds in a folder of its own, so the long mode can run beside a
# debug `swift test` (SwiftPM holds a lock on its build folder for the whole run).
if [ -n "${VAULTSYNC_LONG_SCRATCH:-}" ]; then flags+=(--scratch-path "$VAULTSYNC_LONG_SCRATCH"); fi
swift build "${flags[@]}" --build-tests
status=0
VAULTSYNC_LONG=1 swift test "${flags[@]}" --skip-build --filter "$filter" >"$log" 2>&1 || status=$?
grep -E "^(fault scenario|crash figures|crash tests|simulation:)|failed|reproduce with" "$log" || true
exit "$status"
