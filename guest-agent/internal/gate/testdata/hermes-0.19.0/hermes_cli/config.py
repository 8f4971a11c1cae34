"""Fixture: the defaults of Hermes 0.19.0 the gate seeds over."""
DEFAULT_CONFIG = {
    "auxiliary": {
        "approval": {
            "provider": "auto",
            "model": "",
            "timeout": 30,
        },
    },
    "approvals": {
        "mode": "smart",
        "timeout": 60,
        "cron_mode": "deny",
    },
}


def _load_config_impl():
    if True:
        managed_config = managed_scope.load_managed_config()


def set_config_value(key, value):
    # Managed scope guard (D2): a key pinned by the managed layer cannot be set by
    pass
