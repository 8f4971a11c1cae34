"""Fixture: the gateway run flag the box passes."""


def add_run_flags(run):
    run.add_argument(
        "--external-supervisor",
        action="store_true",
    )
