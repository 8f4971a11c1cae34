#!/usr/bin/env bash
# Runs every Go benchmark COUNT times and prints each one's median ns/op,
# plus any custom metrics (for example rss-KiB), beside the raw output, with
# each goal of the issues beside the figure it constrains.
# Usage: scripts/bench.sh [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
out=$(mktemp)
goals=$(mktemp)
trap 'rm -f "$out" "$goals"' EXIT
# One goal a line: benchmark, metric, <= or >=, value.
cat >"$goals" <<'EOF'
BenchmarkUnpackRealShaped agent/tar-tmpfs <= 1.0
BenchmarkUnpackRealShaped agent/tar-disk <= 1.3
BenchmarkUnpackRealShaped agent-peak-rss-tmpfs-MiB <= 40
BenchmarkUnpackRealShaped agent-peak-rss-disk-MiB <= 40
EOF
go test -run '^$' -bench . -benchmem -count "$count" ./... | tee "$out"
echo
echo "medians over $count runs, goals beside the figures they constrain:"
awk '
  FNR == NR { goals[$1 SUBSEP $2] = $3 " " $4; next }
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 3; i < NF; i += 2) { key = name SUBSEP $(i+1); vals[key] = vals[key] " " $i }
  }
  END {
    for (key in vals) {
      split(key, parts, SUBSEP); n = split(substr(vals[key], 2), v, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
      med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      verdict = ""
      if (key in goals) {
        split(goals[key], g, " ")
        ok = (g[1] == "<=") ? (med <= g[2] + 0) : (med >= g[2] + 0)
        verdict = sprintf("goal %s %s: %s", g[1], g[2], ok ? "met" : "MISSED")
      }
      printf "  %-44s %-34s %14.3f  %s\n", parts[1], parts[2], med, verdict
    }
  }' "$goals" "$out" | sort
