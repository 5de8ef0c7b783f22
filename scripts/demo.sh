#!/usr/bin/env bash
# The README's first command: installs what the build needs (scripts/setup.sh), then runs the offline
# demo on embedded defaults: two devices, a real server on loopback that goes away, a conflict
# resolved without loss. Extra arguments go to `vaultsync demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
# The demo runs the vaultsync-server executable beside vaultsync, and `vaultsync` is a front that runs
# vaultsync-cli (docs/CLI.md, "The agent"): all three are built.
swift build --product vaultsync-server
swift build --product vaultsync-cli
swift run vaultsync demo "$@"
