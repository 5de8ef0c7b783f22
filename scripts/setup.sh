#!/usr/bin/env bash
# Installs, or checks, what VaultSync needs from the system before `swift build` can run.
#   scripts/setup.sh build   the build: Swift, and SQLite's headers on Linux (Argon2 is compiled in)
#   scripts/setup.sh test    the build, plus a PostgreSQL server for the PostgreSQL half of the tests
# Debian/Ubuntu: installs with apt-get (as root, or through sudo). macOS: the build needs only Xcode's
# Swift; PostgreSQL comes from Homebrew. Anywhere else, or without root, it says what to install and
# stops. Sourced by scripts/demo.sh and scripts/test.sh; safe to run again (installs only what is missing).
set -euo pipefail
need=${1:-build}

say() { echo "setup: $*" >&2; }
fail() { echo "setup: $*" >&2; exit 1; }

command -v swift >/dev/null 2>&1 || fail "Swift 6.1 or later is not on PATH. Install it from https://www.swift.org/install/ and run this again."

# Runs a command as root: directly, through sudo, or not at all (with the command to run by hand).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then
    say "installing needs root; asking sudo for: $*"
    sudo "$@"
  else
    return 1
  fi
}

case "$(uname -s)" in
  Linux)
    if command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
      packages=(libsqlite3-dev)
      # The tests also run a real vi at a pseudo-terminal (vim-tiny) and copy to a real X clipboard (xclip, Xvfb).
      [ "$need" = test ] && packages+=(postgresql vim-tiny xclip xvfb)
      missing=()
      for package in "${packages[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
      done
      if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]} (Debian packages)"
        export DEBIAN_FRONTEND=noninteractive
        if ! { as_root apt-get update -qq && as_root apt-get install -y -qq "${missing[@]}"; }; then
          fail "could not install ${missing[*]}. As root, run: apt-get install -y ${missing[*]}"
        fi
      fi
    else
      # Not Debian: check for the files instead of the packages, and name each distribution's package.
      [ -f /usr/include/sqlite3.h ] || fail "SQLite's headers are missing. Install them (Fedora: dnf install sqlite-devel; Arch: pacman -S sqlite; Alpine: apk add sqlite-dev) and run this again."
      if [ "$need" = test ] && ! command -v initdb >/dev/null 2>&1 && ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
        say "no PostgreSQL server found (initdb): the PostgreSQL half of the tests will be skipped. Install postgresql to run it."
      fi
    fi
    ;;
  Darwin)
    # SQLite ships with macOS; Argon2 is compiled in. Only the tests' PostgreSQL comes from Homebrew.
    if [ "$need" = test ] && ! command -v initdb >/dev/null 2>&1; then
      if command -v brew >/dev/null 2>&1; then
        brew list postgresql@17 >/dev/null 2>&1 || { say "installing postgresql@17 (Homebrew)"; brew install postgresql@17; }
      else
        say "Homebrew not found: the PostgreSQL half of the tests will be skipped. Install https://brew.sh and run this again to include it."
      fi
    fi
    ;;
  *)
    say "unknown system $(uname -s): trying the build as it is"
    ;;
esac
