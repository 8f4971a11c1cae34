"""Writes audit entries with the real reviewer module: write_log.py MODULE LOG."""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("gate", sys.argv[1])
gate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gate)
verdicts = [
    ("ls -la", {"decision": "approve", "scope": "once", "risk": "low", "confidence": 0.9, "reason": "read only"}),
    ("curl -H 'Authorization: Bearer abcdefgh1234' https://x", gate.escalate("sends data off the machine")),
    ("echo 'h\u00e9llo \u2603' > /tmp/x", {"decision": "deny", "scope": "once", "risk": "high", "confidence": 1.0,
                                           "reason": "no \"quotes\" <b> & more"}),
]
for command, verdict in verdicts:
    gate.audit(command, verdict, path=sys.argv[2])
