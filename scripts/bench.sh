#!/usr/bin/env bash
# Runs every Go benchmark COUNT times and prints each one's median ns/op,
# plus any custom metrics (for example rss-KiB), beside the raw output.
# Usage: scripts/bench.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchmem -count "$count" ./... | tee "$out"
echo
echo "medians over $count runs:"
awk '
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 3; i < NF; i += 2) { key = name SUBSEP $(i+1); vals[key] = vals[key] " " $i; units[name] = units[name] " " $(i+1) }
    names[name] = 1
  }
  END {
    for (key in vals) {
      split(key, parts, SUBSEP); n = split(substr(vals[key], 2), v, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
      med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      printf "  %-60s %14.1f %s\n", parts[1], med, parts[2]
    }
  }' "$out" | sort
