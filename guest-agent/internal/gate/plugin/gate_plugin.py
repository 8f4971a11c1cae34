"""hermes-box-gate: Hermes Box's approval gate on Hermes' own smart approvals.

From Hermes 0.19 the box runs Hermes' smart approvals (``approvals.mode:
smart``, the reviewer model from ``auxiliary.approval``).  What configuration
cannot express, this plugin adds when Hermes loads it:

* the structured verdict: ``tools.approval._smart_approve`` is wrapped so the
  reviewer answers with the JSON verdict of ``gated_approval`` (hardline list
  first, confidence >= 0.75 and risk <= medium floors, every failure
  escalates) and Hermes gets its one word back: approve (this one command
  only, as Hermes 0.19 does), deny or escalate;
* a denial blocks: Hermes 0.19 would let the owner override a smart denial;
  the seed's meaning is that a denial is final, so the human is not asked;
* the reason shown to the human: an escalated command reaches the gateway
  or CLI prompt with the reviewer's reason appended to its description;
* the audit record: every reviewer verdict (in ``gated_approval``) and every
  human request and answer (the ``pre_approval_request`` and
  ``post_approval_response`` hooks) go to one hash-chained log.

Hermes' hooks are observers, so the three wraps are the only code this gate
runs inside Hermes; ``hermes-box-agent patch --check`` verifies every name
they rely on before the plugin is installed, and the agent's probe checks
that they are in place in the installed Hermes.
"""

from __future__ import annotations

import functools
import logging
import threading

from . import gated_approval as reviewer

logger = logging.getLogger(__name__)

NAME = "hermes-box-gate"
WRAPPED = "_hermes_box_gate"
REASON_PREFIX = "\nApproval reviewer: "
# The seed's human wait at the CLI prompt; Hermes 0.19 reads one
# approvals.timeout for both surfaces, which the box sets to the gateway's 300.
CLI_TIMEOUT = 60

_last = threading.local()


def _aux_timeout():
    """The reviewer timeout as Hermes resolves auxiliary.approval.timeout."""
    try:
        from agent.auxiliary_client import _get_task_timeout
        return float(_get_task_timeout("approval"))
    except Exception:
        return reviewer.DEFAULTS["timeout"]


def hermes_call(**kwargs):
    """Call Hermes' auxiliary client for the approval task: provider, model,
    reasoning effort, service tier and timeout come from auxiliary.approval."""
    from agent.auxiliary_client import call_llm
    keep = {k: kwargs[k] for k in ("messages", "temperature", "max_tokens", "timeout") if k in kwargs}
    return call_llm(task="approval", **keep)


def review(command, description, call=None):
    """Review one flagged command; returns Hermes' word and keeps the verdict
    for the prompt that may follow on this thread."""
    _last.verdict = None
    verdict = reviewer.review_command(command, description, [], {"timeout": _aux_timeout()}, call=call or hermes_call)
    _last.verdict = verdict
    return verdict["decision"]


def take_verdict():
    """The verdict of the last review on this thread, once."""
    verdict = getattr(_last, "verdict", None)
    _last.verdict = None
    return verdict


def reason_line(verdict):
    return "%s%s (risk=%s, confidence=%.2f): %s" % (
        REASON_PREFIX, verdict["decision"], verdict["risk"], float(verdict["confidence"]), verdict["reason"])


def _wrap_smart_approve(original):
    @functools.wraps(original)
    def smart_approve(command, description):
        return review(command, description)
    setattr(smart_approve, WRAPPED, True)
    return smart_approve


def _denied_result(verdict):
    reason = verdict["reason"] if verdict else "the approval reviewer denied it"
    return {"resolved": True, "choice": "deny", "reason": "the approval reviewer denied it: " + reason}


def _wrap_await(original):
    @functools.wraps(original)
    def await_decision(session_key, notify_cb, approval_data, *args, **kwargs):
        verdict = take_verdict()
        if isinstance(approval_data, dict) and approval_data.get("smart_denied"):
            return _denied_result(verdict)
        if verdict is not None and isinstance(approval_data, dict):
            approval_data["description"] = str(approval_data.get("description", "")) + reason_line(verdict)
        return original(session_key, notify_cb, approval_data, *args, **kwargs)
    setattr(await_decision, WRAPPED, True)
    return await_decision


def _wrap_prompt(original):
    @functools.wraps(original)
    def prompt(command, description, *args, **kwargs):
        verdict = take_verdict()
        if kwargs.get("smart_denied"):
            return "deny"
        if not args and kwargs.get("timeout_seconds") is None:
            kwargs["timeout_seconds"] = CLI_TIMEOUT
        if verdict is not None:
            description = str(description) + reason_line(verdict)
        return original(command, description, *args, **kwargs)
    setattr(prompt, WRAPPED, True)
    return prompt


# The names in tools.approval this plugin replaces, and their wrappers.
WRAPS = (
    ("_smart_approve", _wrap_smart_approve),
    ("_await_gateway_decision", _wrap_await),
    ("prompt_dangerous_approval", _wrap_prompt),
)


def install(approval=None):
    """Wrap the names in WRAPS in tools.approval (once)."""
    if approval is None:
        import tools.approval as approval
    for name, wrap in WRAPS:
        current = getattr(approval, name)
        if not getattr(current, WRAPPED, False):
            setattr(approval, name, wrap(current))


def installed(approval=None):
    """True when every name in WRAPS is wrapped."""
    if approval is None:
        import tools.approval as approval
    return all(getattr(getattr(approval, name, None), WRAPPED, False) for name, _ in WRAPS)


def _human(decision, command, description, risk="unknown"):
    try:
        reviewer.audit(command, {"decision": decision, "risk": risk, "confidence": 0.0,
                                 "reason": str(description or "")})
    except Exception as exc:
        logger.warning("approval gate audit log unavailable: %s", type(exc).__name__)


def on_pre_approval_request(command="", description="", surface="", **_):
    """Record that a person was asked, with the description they were shown."""
    if surface in ("gateway", "cli"):
        _human("human-asked:" + surface, command, description)


def on_post_approval_response(command="", description="", surface="", choice="", **_):
    """Record the person's answer (once, session, always, deny, timeout)."""
    if surface in ("gateway", "cli"):
        _human("human:" + str(choice), command, description)


def register(ctx):
    install()
    ctx.register_hook("pre_approval_request", on_pre_approval_request)
    ctx.register_hook("post_approval_response", on_post_approval_response)
