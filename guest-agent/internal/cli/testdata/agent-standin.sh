#!/bin/sh
# Stands in for /usr/local/sbin/hermes-box-agent in a test's box root: the
# test binary, which is the agent when HERMES_BOX_AGENT_TEST_MAIN=1, working
# on that root. boot passes HBX_TEST_AGENT and HBX_TEST_ROOT down to it.
HERMES_BOX_AGENT_TEST_MAIN=1 exec "$HBX_TEST_AGENT" --root "$HBX_TEST_ROOT" "$@"
