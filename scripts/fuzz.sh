#!/usr/bin/env bash
# Runs each Go fuzz target in the module for a short time (default 5s).
# Usage: scripts/fuzz.sh [FUZZTIME]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-5s}
count=0
for pkg in $(go list ./...); do
  while read -r target; do
    [[ $target == Fuzz* ]] || continue
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
    count=$((count + 1))
  done < <(go test -list '^Fuzz' "$pkg" 2>/dev/null)
done
echo "fuzzed $count targets"
