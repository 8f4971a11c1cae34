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
