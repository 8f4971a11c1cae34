#!/usr/bin/env bash
# export-hermes-trees.sh GITDIR... OUT — export the four Hermes commits the
# gate tests run against (0.16.0, 0.17.0, 0.18.2, 0.19.0) with `git archive`
# into OUT/v<version>, from whichever of the given git directories holds
# each commit (for example clones of the forks thanhdatbui/hermes-agent and
# KushBeaverTTV/hermes-agent). Then:
#   HERMES_BOX_HERMES_TREES=OUT go test ./guest-agent/internal/gate/
#   HERMES_GATE_TREE_0190=OUT/v0.19.0 python3 -m unittest discover -s guest-agent/internal/gate
# Nothing exported here is ever committed.
set -euo pipefail
if [ "$#" -lt 2 ]; then
  echo "usage: $0 GITDIR... OUT" >&2
  exit 2
fi
out=${*: -1}
gitdirs=("${@:1:$#-1}")
commits=(
  "0.16.0 81eaedd0f5c471c7ee748990066135a684f3c962"
  "0.17.0 2bd1977d8fad185c9b4be47884f7e87f1add0ce3"
  "0.18.2 9de9c25f620ff7f1ce0fd5457d596052d5159596"
  "0.19.0 3ef6bbd201263d354fd83ec55b3c306ded2eb72a"
)
for line in "${commits[@]}"; do
  read -r version commit <<<"$line"
  found=""
  for g in "${gitdirs[@]}"; do
    if git --git-dir="$g" cat-file -e "$commit^{commit}" 2>/dev/null; then
      found=$g
      break
    fi
  done
  if [ -z "$found" ]; then
    echo "$0: no given git directory holds Hermes $version ($commit)" >&2
    exit 1
  fi
  rm -rf "${out:?}/v$version"
  mkdir -p "$out/v$version"
  git --git-dir="$found" archive "$commit" | tar -x -C "$out/v$version"
  echo "Hermes $version ($commit) -> $out/v$version"
done
