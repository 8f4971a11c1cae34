#!/usr/bin/env bash
# Runs every Python unittest suite in the tree (files named test_*.py),
# one discovery per directory. Prints nothing and succeeds when there are none.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t dirs < <(git ls-files -co --exclude-standard '*test_*.py' | xargs -r -n1 dirname | sort -u)
for d in "${dirs[@]}"; do
  echo "python3 -m unittest discover -s $d"
  python3 -m unittest discover -s "$d" -p 'test_*.py'
done
