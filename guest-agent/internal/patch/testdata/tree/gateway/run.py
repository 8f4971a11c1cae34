"""Fixture for the patch tests: a few lines shaped like Hermes' gateway runner."""
import logging

logger = logging.getLogger(__name__)


class GatewayRunner:
    async def _run_agent(self, message, history, source, session_id, session_key):
        platform_key = "cli"
        progress_queue = []

        def progress_callback(event_type: str, tool_name: str = None, preview: str = None, args: dict = None, **kwargs):
            """Callback invoked by agent on tool lifecycle events."""
            if not progress_queue:
                return

        def run_sync():
            from tools.approval import (
                register_gateway_notify,
                reset_current_session_key,
                set_current_session_key,
                unregister_gateway_notify,
            )

            _approval_session_key = session_key or ""
            _approval_session_token = set_current_session_key(_approval_session_key)
            register_gateway_notify(_approval_session_key, None)
            try:
                result = platform_key
            finally:
                unregister_gateway_notify(_approval_session_key)
                reset_current_session_key(_approval_session_token)
            return result

        return run_sync, progress_callback
