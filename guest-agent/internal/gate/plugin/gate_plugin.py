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
* path-qualified commands judged like bare ones: the variants Hermes'
  hardline, deny and dangerous lists read (``_command_detection_variants``)
  also include the command with every command word spelled bare, so
  ``/usr/bin/sudo``, ``\\sudo``, ``"sudo"``, ``env sudo`` and ``command sudo``
  meet the rules written for ``sudo``;
* the audit record: every reviewer verdict (in ``gated_approval``) and every
  human request and answer (the ``pre_approval_request`` and
  ``post_approval_response`` hooks) go to one hash-chained log;
* the seed's 60 s human wait in the interactive chat: Hermes 0.19 has one
  ``approvals.timeout`` for the gateway and the CLI, and the box seeds the
  gateway's 300.  ``HermesCLI._approval_callback`` (cli.py) reads it from
  ``CLI_CONFIG`` itself, so ``timeout_seconds`` of
  ``prompt_dangerous_approval`` never reaches it.  The plugin is loaded
  before cli.py is imported, so it wraps
  ``tools.terminal_tool.set_approval_callback``, which HermesCLI calls with
  its bound ``_approval_callback`` before any prompt, and there wraps that
  method in its class (at once when cli.py is already loaded): for the
  length of a prompt ``CLI_CONFIG["approvals"]["timeout"]`` reads
  CLI_TIMEOUT.

Hermes' hooks are observers, so these wraps are the only code this gate runs
inside Hermes.  Every name they rely on is a requirement of the check verb
(``hermes-box-agent patch --check DIR``, Go ``gate.Requirements``), verified
on the pinned 0.19.0 tree when the release is added; provisioning installs
the plugin only into a tree holding that pinned commit, and then, as in
every health report, the agent's probe asks the installed Hermes whether the
plugin is loaded with its hooks and its wraps in place.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading

from . import gated_approval as reviewer

logger = logging.getLogger(__name__)

NAME = "hermes-box-gate"
WRAPPED = "_hermes_box_gate"
REASON_PREFIX = "\nApproval reviewer: "
# The seed's human wait at the CLI prompt; Hermes 0.19 reads one
# approvals.timeout for both surfaces, which the box sets to the gateway's 300.
CLI_TIMEOUT = 60
# HermesCLI's prompt method, and the module global it reads its wait from.
CLI_CALLBACK = "_approval_callback"
CLI_CONFIG_NAME = "CLI_CONFIG"

_last = threading.local()
# Held for the length of one CLI prompt, while its wait reads CLI_TIMEOUT.
_cli_wait = threading.Lock()
_cli_install = threading.Lock()


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


def _wrap_variants(original):
    """Hermes' detection variants, then those of the command spelled bare
    (gated_approval.bare_command_variant): the hardline, deny and dangerous
    lists, which all read these variants, judge /usr/bin/sudo, \\sudo,
    "sudo", env sudo and command sudo as they judge sudo."""
    @functools.wraps(original)
    def variants(command):
        seen = set()
        for variant in original(command):
            seen.add(variant)
            yield variant
        bare = reviewer.bare_command_variant(command)
        if bare is None:
            return
        for variant in original(bare):
            if variant not in seen:
                seen.add(variant)
                yield variant
    setattr(variants, WRAPPED, True)
    return variants


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


def _cli_approvals(function):
    """The approvals dict of the CLI_CONFIG the function reads, or None."""
    config = getattr(function, "__globals__", {}).get(CLI_CONFIG_NAME)
    approvals = config.get("approvals") if isinstance(config, dict) else None
    return approvals if isinstance(approvals, dict) else None


def _wrap_cli_prompt(original):
    """HermesCLI._approval_callback, waiting CLI_TIMEOUT: it reads
    CLI_CONFIG["approvals"]["timeout"] as it starts, so the key holds
    CLI_TIMEOUT while it runs (prompts are serialised, as Hermes serialises
    them with its own lock) and its value is put back after."""
    @functools.wraps(original)
    def approval_callback(self, *args, **kwargs):
        approvals = _cli_approvals(original)
        if approvals is None:  # no approvals block: Hermes' own default, 60
            return original(self, *args, **kwargs)
        with _cli_wait:
            missing = object()
            saved = approvals.get("timeout", missing)
            approvals["timeout"] = CLI_TIMEOUT
            try:
                return original(self, *args, **kwargs)
            finally:
                if approvals.get("timeout") == CLI_TIMEOUT:
                    if saved is missing:
                        approvals.pop("timeout", None)
                    else:
                        approvals["timeout"] = saved
    setattr(approval_callback, WRAPPED, True)
    return approval_callback


def install_cli(cls):
    """Wrap cls._approval_callback (HermesCLI's prompt) once."""
    with _cli_install:
        current = getattr(cls, CLI_CALLBACK, None)
        if current is not None and not getattr(current, WRAPPED, False):
            setattr(cls, CLI_CALLBACK, _wrap_cli_prompt(current))


def cli_installed(cls):
    return bool(getattr(getattr(cls, CLI_CALLBACK, None), WRAPPED, False))


def _is_cli_prompt(callback):
    """True for a bound _approval_callback whose module has a CLI_CONFIG."""
    func = getattr(callback, "__func__", None)
    return (getattr(callback, "__self__", None) is not None and getattr(func, "__name__", "") == CLI_CALLBACK
            and CLI_CONFIG_NAME in getattr(func, "__globals__", {}))


def _wrap_set_callback(original):
    @functools.wraps(original)
    def set_approval_callback(cb, *args, **kwargs):
        if _is_cli_prompt(cb):
            install_cli(type(cb.__self__))
            cb = getattr(cb.__self__, CLI_CALLBACK)  # bound to the wrapped method
        return original(cb, *args, **kwargs)
    setattr(set_approval_callback, WRAPPED, True)
    return set_approval_callback


# The names in tools.approval this plugin replaces, and their wrappers.
WRAPS = (
    ("_command_detection_variants", _wrap_variants),
    ("_smart_approve", _wrap_smart_approve),
    ("_await_gateway_decision", _wrap_await),
    ("prompt_dangerous_approval", _wrap_prompt),
)
# The names in tools.terminal_tool it replaces: where HermesCLI registers
# its prompt, the first point in the CLI process where that class is known.
TERMINAL_WRAPS = (
    ("set_approval_callback", _wrap_set_callback),
)


def _modules(approval, terminal):
    if approval is None:
        import tools.approval as approval
    if terminal is None:
        import tools.terminal_tool as terminal
    return ((approval, WRAPS), (terminal, TERMINAL_WRAPS))


def install(approval=None, terminal=None):
    """Wrap the names in WRAPS in tools.approval and TERMINAL_WRAPS in
    tools.terminal_tool (once), and HermesCLI's prompt if cli.py is loaded."""
    for module, wraps in _modules(approval, terminal):
        for name, wrap in wraps:
            current = getattr(module, name)
            if not getattr(current, WRAPPED, False):
                setattr(module, name, wrap(current))
    cls = getattr(sys.modules.get("cli"), "HermesCLI", None)
    if cls is not None:
        install_cli(cls)


def installed(approval=None, terminal=None):
    """True when every name in WRAPS and TERMINAL_WRAPS is wrapped."""
    return all(getattr(getattr(module, name, None), WRAPPED, False)
               for module, wraps in _modules(approval, terminal) for name, _ in wraps)


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
