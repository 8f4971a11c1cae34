"""GitSpawn (CVE-2026-71963) on a real Hermes tree: builds the workspace
block Hermes 0.19.0 puts in an agent's system prompt at session start
(agent.coding_context.build_coding_workspace_block, which runs `git status`
in the session's directory before any approval) for the directory given.
Arguments: the Hermes tree, the directory."""

import os
import sys

sys.path.insert(0, os.path.abspath(sys.argv[1]))
from agent.coding_context import build_coding_workspace_block  # noqa: E402

print(build_coding_workspace_block(sys.argv[2]))
