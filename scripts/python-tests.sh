#!/usr/bin/env bash
# Runs every Python unittest suite in the tree (files named test_*.py),
# one discovery per directory, with HERMES_BOX_HERMES_PYTHON (an interpreter
# with Hermes' imports, httpx and requests) or python3. Prints nothing and
# succeeds when there are none.
#
# With HERMES_BOX_HERMES_TREES (the real Hermes exports CI unpacks from
# ../shared/hermes-trees), the gate's suites run on patched copies of them:
# the plugin's on v0.19.0 (HERMES_GATE_TREE_0190, set from it when unset),
# the source patch's on v0.16.0 and v0.17.0, driving each patched
# tools.approval; HERMES_GATE_ORIGINAL names the unpatched tree, the
# control. In CI (CI=true) the trees are required.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${HERMES_BOX_HERMES_PYTHON:-python3}
trees=${HERMES_BOX_HERMES_TREES:-}
if [ -z "$trees" ] && [ "${CI:-}" = true ]; then
  echo "$0: CI needs HERMES_BOX_HERMES_TREES (the real Hermes trees)" >&2
  exit 1
fi
if [ -n "$trees" ]; then
  export HERMES_GATE_TREE_0190=${HERMES_GATE_TREE_0190:-$trees/v0.19.0}
fi
patch_dir=guest-agent/internal/patch
gate_dir=guest-agent/internal/gate
mapfile -t dirs < <(git ls-files -co --exclude-standard '*test_*.py' | xargs -r -n1 dirname | sort -u)
for d in "${dirs[@]}"; do
  if [ -n "$trees" ] && { [ "$d" = "$patch_dir" ] || [ "$d" = "$gate_dir" ]; }; then
    continue # run below, on the patched real trees
  fi
  echo "$python -m unittest discover -s $d"
  "$python" -m unittest discover -s "$d" -p 'test_*.py'
done
[ -n "$trees" ] || exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/agent" ./guest-agent
for v in 0.16.0 0.17.0 0.19.0; do
  orig=$trees/v$v
  [ "$v" != 0.19.0 ] || orig=$HERMES_GATE_TREE_0190
  src=$work/v$v
  cp -a "$orig" "$src"
  commit=$(cat "$src/.commit")
  echo "commit=$commit" >"$src/.hermes-box-source"
  "$work/agent" patch hermes --no-seed --python "$python" --commit "$commit" "$src"
  if [ "$v" = 0.19.0 ]; then
    echo "$python -m unittest discover -s $gate_dir (on the patched Hermes $v)"
    HERMES_GATE_TREE_0190=$src HERMES_GATE_ORIGINAL=$orig "$python" -m unittest discover -s "$gate_dir" -p 'test_*.py'
    continue
  fi
  echo "$python -m unittest discover -s $patch_dir (on the patched Hermes $v)"
  HERMES_GATE_SOURCE=$src HERMES_GATE_MODULE=$src/tools/gated_approval.py HERMES_GATE_INTEGRATION=1 HERMES_GATE_ORIGINAL=$orig \
    HERMES_HOME=$work/home-$v "$python" -m unittest discover -s "$patch_dir" -p 'test_*.py'
done
