#!/bin/sh
# Stand-in for bun inside test images. It understands only the validation
# call `bun build ENTRY --target=bun --outdir=DIR` and writes DIR/serve.js.
set -eu
[ "${1:-}" = build ] || { echo "fake bun: only build is supported" >&2; exit 64; }
entry=$2
out=
for a in "$@"; do
  case $a in --outdir=*) out=${a#--outdir=} ;; esac
done
[ -n "$out" ] || { echo "fake bun: no --outdir" >&2; exit 64; }
mkdir -p "$out"
cat "$entry" > "$out/serve.js"
