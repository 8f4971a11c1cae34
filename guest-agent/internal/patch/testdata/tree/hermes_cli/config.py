"""Fixture: the lines of Hermes 0.17.0's config loader the gate relies on."""


def _load_config_impl():
    if True:
        managed_config = managed_scope.load_managed_config()


def set_config_value(key, value):
    # Managed scope guard (D2): a key pinned by the managed layer cannot be set by
    pass
