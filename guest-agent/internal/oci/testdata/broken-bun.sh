#!/bin/sh
# Stand-in for a bun whose build fails, as with an unresolved import.
echo 'error: Could not resolve: "@executor-js/missing"' >&2
exit 1
