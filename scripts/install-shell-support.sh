#!/usr/bin/env bash
# Installs vaultsync's shell completions (bash, zsh, fish) and its man page for the current user:
#   scripts/install-shell-support.sh [path/to/vaultsync]
# The completions come from the executable itself (swift-argument-parser's generator), so they match
# the build; the man page is generated from the same command tree (`vaultsync.1`). Everything goes
# under $HOME (XDG folders); nothing needs root. Run it again after an update.
set -euo pipefail
cd "$(dirname "$0")/.."
vaultsync=${1:-}
if [ -z "$vaultsync" ]; then
  swift build --product vaultsync >&2
  swift build --product vaultsync-cli >&2
  vaultsync="$(swift build --show-bin-path)/vaultsync"
fi
[ -x "$vaultsync" ] || { echo "install-shell-support: $vaultsync is not an executable" >&2; exit 1; }

data=${XDG_DATA_HOME:-$HOME/.local/share}
config=${XDG_CONFIG_HOME:-$HOME/.config}
mkdir -p "$data/bash-completion/completions" "$data/zsh/site-functions" "$config/fish/completions" "$data/man/man1"
"$vaultsync" --generate-completion-script bash > "$data/bash-completion/completions/vaultsync"
"$vaultsync" --generate-completion-script zsh > "$data/zsh/site-functions/_vaultsync"
"$vaultsync" --generate-completion-script fish > "$config/fish/completions/vaultsync.fish"
"$vaultsync" manual > "$data/man/man1/vaultsync.1"
echo "installed: bash ($data/bash-completion/completions/vaultsync, loaded by bash-completion), zsh ($data/zsh/site-functions/_vaultsync: add that folder to fpath), fish ($config/fish/completions/vaultsync.fish), man ($data/man/man1/vaultsync.1: man vaultsync)" >&2
