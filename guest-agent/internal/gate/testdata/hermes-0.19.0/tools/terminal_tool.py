"""Fixture for the gate tests: the terminal tool's callback registration and
guard, in a shape of their own."""
import threading

from tools.approval import check_all_command_guards as _check_all_guards_impl

_callback_tls = threading.local()


def _get_approval_callback():
    return getattr(_callback_tls, "approval", None)


def set_approval_callback(cb):
    _callback_tls.approval = cb


def _check_all_guards(command: str, env_type: str) -> dict:
    return _check_all_guards_impl(command, env_type,
                                  approval_callback=_get_approval_callback(),
                                  has_host_access=False)
