#!/usr/bin/env bash
# Runs every Go benchmark COUNT times and prints each one's median ns/op,
# plus any custom metrics (for example rss-KiB), beside the raw output; then
# each goal of the issues with the figure it constrains, the baseline's
# figure and their ratio where the goal is a ratio, and whether it is met.
# Usage: scripts/bench.sh [COUNT]
# HB_BENCH picks the benchmarks (a go test -bench regexp, default all);
# HB_BENCH_BOX_MB sizes the incremental snapshot benchmark's tree (default
# 2048 MB and 100,000 entries; each run of it takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
out=$(mktemp)
goals=$(mktemp)
trap 'rm -f "$out" "$goals"' EXIT
# One goal a line, fields separated by tabs: what it is, the benchmark and
# metric it constrains, the baseline's benchmark and metric (-: the goal is
# on the figure itself, otherwise on figure / baseline), <= or >=, value.
tab=$'\t'
sed "s/  *|  */$tab/g" >"$goals" <<'EOF_GOALS'
relay call, dialled | BenchmarkRelayHealthDial ns/op | BenchmarkOpenSSHSpawnHealth ns/op | <= | 0.333
supervisor idle RSS | BenchmarkIdleRSS/agent rss-KiB | BenchmarkIdleRSS/supervisord rss-KiB | <= | 0.5
services status | BenchmarkStatusRoundTrip/agent-cli ns/op | BenchmarkStatusRoundTrip/supervisorctl-cli ns/op | <= | 0.5
snapshot stream | BenchmarkSnapshotStream/agent+sha256 MB/s | BenchmarkSnapshotStream/tar+pigz+sha256sum MB/s | >= | 1.0
unpack, tmpfs | BenchmarkUnpackRealShaped agent-tmpfs-s | BenchmarkUnpackRealShaped tar-tmpfs-s | <= | 1.0
unpack, disk | BenchmarkUnpackRealShaped agent-disk-s | BenchmarkUnpackRealShaped tar-disk-s | <= | 1.3
unpack peak memory, tmpfs | BenchmarkUnpackRealShaped agent-peak-rss-tmpfs-MiB | - | <= | 40
unpack peak memory, disk | BenchmarkUnpackRealShaped agent-peak-rss-disk-MiB | - | <= | 40
hermes-box status, whole process | BenchmarkStatusWholeProcess status-ms | - | <= | 100
synthetic: 2nd adds vs a full v2 | BenchmarkIncrementalBox/synthetic inc-second-added-MB | BenchmarkIncrementalBox/synthetic v2-second-MB | <= | 0.05
real: 2nd adds vs a full v2 | BenchmarkIncrementalBox/real inc-second-added-MB | BenchmarkIncrementalBox/real v2-second-MB | <= | 0.05
synthetic: 2nd snapshot vs v2 | BenchmarkIncrementalBox/synthetic inc-second-s | BenchmarkIncrementalBox/synthetic v2-second-s | <= | 0.15
real: 2nd snapshot vs v2 | BenchmarkIncrementalBox/real inc-second-s | BenchmarkIncrementalBox/real v2-second-s | <= | 0.15
synthetic: 1st snapshot vs v2 | BenchmarkIncrementalBox/synthetic inc-first-s | BenchmarkIncrementalBox/synthetic v2-first-s | <= | 1.1
real: 1st snapshot vs v2 | BenchmarkIncrementalBox/real inc-first-s | BenchmarkIncrementalBox/real v2-first-s | <= | 1.1
synthetic: restore stage vs v2 | BenchmarkIncrementalBox/synthetic inc-restore-s | BenchmarkIncrementalBox/synthetic v2-restore-s | <= | 1.2
real: restore stage vs v2 | BenchmarkIncrementalBox/real inc-restore-s | BenchmarkIncrementalBox/real v2-restore-s | <= | 1.2
synthetic: 2nd snapshot vs restic | BenchmarkIncrementalBox/synthetic inc-second-s | BenchmarkIncrementalBox/synthetic restic-second-s | <= | 0.3
real: 2nd snapshot vs restic | BenchmarkIncrementalBox/real inc-second-s | BenchmarkIncrementalBox/real restic-second-s | <= | 0.3
synthetic: 2nd snapshot vs borg | BenchmarkIncrementalBox/synthetic inc-second-s | BenchmarkIncrementalBox/synthetic borg-second-s | <= | 0.3
real: 2nd snapshot vs borg | BenchmarkIncrementalBox/real inc-second-s | BenchmarkIncrementalBox/real borg-second-s | <= | 0.3
synthetic: 2nd adds on disk vs restic | BenchmarkIncrementalBox/synthetic inc-second-added-MB | BenchmarkIncrementalBox/synthetic restic-second-added-MB | <= | 0.9
real: 2nd adds on disk vs restic | BenchmarkIncrementalBox/real inc-second-added-MB | BenchmarkIncrementalBox/real restic-second-added-MB | <= | 0.9
synthetic: 2nd adds on disk vs borg | BenchmarkIncrementalBox/synthetic inc-second-added-MB | BenchmarkIncrementalBox/synthetic borg-second-added-MB | <= | 0.8
real: 2nd adds on disk vs borg | BenchmarkIncrementalBox/real inc-second-added-MB | BenchmarkIncrementalBox/real borg-second-added-MB | <= | 0.8
synthetic: full restore vs restic | BenchmarkIncrementalBox/synthetic inc-restore-full-s | BenchmarkIncrementalBox/synthetic restic-restore-s | <= | 0.5
real: full restore vs restic | BenchmarkIncrementalBox/real inc-restore-full-s | BenchmarkIncrementalBox/real restic-restore-s | <= | 0.5
synthetic: full restore vs borg | BenchmarkIncrementalBox/synthetic inc-restore-full-s | BenchmarkIncrementalBox/synthetic borg-restore-s | <= | 0.7
real: full restore vs borg | BenchmarkIncrementalBox/real inc-restore-full-s | BenchmarkIncrementalBox/real borg-restore-s | <= | 0.7
synthetic: 1st snapshot vs restic | BenchmarkIncrementalBox/synthetic inc-first-s | BenchmarkIncrementalBox/synthetic restic-first-s | <= | 0.8
real: 1st snapshot vs restic | BenchmarkIncrementalBox/real inc-first-s | BenchmarkIncrementalBox/real restic-first-s | <= | 0.8
synthetic: peak heap, 1st snapshot | BenchmarkIncrementalBox/synthetic inc-first-peak-MiB | - | <= | 64
real: peak heap, 1st snapshot | BenchmarkIncrementalBox/real inc-first-peak-MiB | - | <= | 64
synthetic: peak heap, 2nd snapshot | BenchmarkIncrementalBox/synthetic inc-second-peak-MiB | - | <= | 64
real: peak heap, 2nd snapshot | BenchmarkIncrementalBox/real inc-second-peak-MiB | - | <= | 64
synthetic: peak heap, restore | BenchmarkIncrementalBox/synthetic inc-restore-peak-MiB | - | <= | 64
real: peak heap, restore | BenchmarkIncrementalBox/real inc-restore-peak-MiB | - | <= | 64
EOF_GOALS
# restic and borg, Debian's packages, are the incremental snapshot
# benchmark's baselines: installed here when missing (as root, through
# apt-get); without one the benchmark leaves its figures out and their
# goal lines say not measured.
missing=()
command -v restic >/dev/null || missing+=(restic)
command -v borg >/dev/null || missing+=(borgbackup)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "bench.sh: installing ${missing[*]} (Debian's packages) for the incremental snapshot benchmark" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bench.sh: ${missing[*]} not installed and cannot be installed here (needs root and apt-get): their goal lines will say not measured" >&2
  fi
fi
go test -run '^$' -bench "${HB_BENCH:-.}" -benchmem -count "$count" -timeout 3h ./... | tee "$out"
echo
echo "medians over $count runs:"
# medians prints "benchmark<TAB>metric<TAB>median" for every figure.
medians() {
  awk '
    /^Benchmark/ {
      name = $1; sub(/-[0-9]+$/, "", name)
      for (i = 3; i < NF; i += 2) { key = name "\t" $(i+1); vals[key] = vals[key] " " $i }
    }
    END {
      for (key in vals) {
        n = split(substr(vals[key], 2), v, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        printf "%s\t%s\n", key, (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      }
    }' "$out" | sort
}
medians | awk -F '\t' '{ printf "  %-50s %-34s %14.3f\n", $1, $2, $3 }'
echo
echo "goals:"
medians | awk -F '\t' '
  FNR == NR { med[$1 " " $2] = $3; next }
  {
    what = $1; fig = $2; base = ($3 == "-") ? "" : $3; op = $4; want = $5
    if (!(fig in med) || (base != "" && !(base in med))) {
      printf "  %-34s goal %s %s: not measured (skipped or failed: %s%s)\n", what, op, want, fig, (base != "" ? ", " base : "")
      next
    }
    v = med[fig] + 0; shown = sprintf("%s %.4g", fig, v)
    if (base != "") {
      if (med[base] + 0 == 0) { printf "  %-34s goal %s %s: baseline is zero\n", what, op, want; next }
      shown = shown sprintf(" / %s %.4g", base, med[base]); v = v / med[base]
      shown = shown sprintf(" = %.3f×", v)
    }
    ok = (op == "<=") ? (v <= want + 0) : (v >= want + 0)
    printf "  %-34s %s; goal %s %s: %s\n", what, shown, op, want, ok ? "met" : "MISSED"
  }' - "$goals"
