#!/usr/bin/env bash
# Fixture: the installer lines hermes-box's provisioning relies on.
PYTHON_VERSION="3.11"

install_uv() {
    local _managed_uv="$HERMES_HOME/bin/uv"
    if [ -x "$_managed_uv" ]; then
        UV_CMD="$_managed_uv"
    fi
}
export PYTHON_VERSION UV_CMD
