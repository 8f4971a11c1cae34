"""Fixture for the gate tests: the lines of Hermes 0.19.0's cli.py that the
smart-plugin mechanism relies on for the chat's human wait, in a shape of
their own."""

CLI_CONFIG = {}


def set_approval_callback(*args, **kwargs):
    from tools.terminal_tool import set_approval_callback as _set_approval_callback
    return _set_approval_callback(*args, **kwargs)


class HermesCLI(object):
    def _approval_callback(self, command: str, description: str,
                           *, allow_permanent: bool = True) -> str:
        with self._approval_lock:
            timeout = int(CLI_CONFIG.get("approvals", {}).get("timeout", 60))
            return "deny" if timeout else "once"

    def _run_turn(self):
        def run_agent():
            if self:
                set_sudo_password_callback(self._sudo_password_callback)
                set_approval_callback(self._approval_callback)
        return run_agent


def set_sudo_password_callback(cb):
    pass
