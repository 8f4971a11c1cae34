"""Hermes Box gated approval: a conservative one-shot model gate.

hermes-box installs this file as ``tools/gated_approval.py`` in a Hermes tree
whose ``tools/approval.py`` it has patched.  With ``approvals.mode: gated`` the
patched approval flow calls :func:`review_command` for a command that Hermes
flagged as dangerous, after the hardline blocklist, the sudo guard, yolo/off,
the permanent allowlist and the session approvals have been consulted.

The verdict is one of:

* ``approve`` -- run this one command once.  Nothing is written to the session
  or permanent approval state, so an identical command is reviewed again.
* ``deny`` -- block the command; the agent is told not to retry.
* ``escalate`` -- ask the human, with the reason attached.

Anything unexpected escalates: malformed model output, exceptions, timeouts,
unknown or excessive risk, a scope other than ``once``, low confidence, an
oversized review packet, a disabled gate, or an audit log that cannot be
written.  The floors (confidence at least 0.75, risk at most ``medium``) are
constants here, so a weakened local config cannot lower them.

Every verdict is appended to a hash-chained JSON Lines audit log that
``hermes-box-agent audit verify`` checks.  Each line is
``{"entry":BODY,"hash":HEX}`` where HEX is the SHA-256 of the exact bytes of
BODY and BODY's ``prev`` is the previous line's hash (64 zeros for the first).
"""

from __future__ import annotations

import contextvars
import datetime
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import threading

logger = logging.getLogger(__name__)

RISKS = ("low", "medium", "high", "critical")
DECISIONS = ("approve", "escalate", "deny")
VERDICT_KEYS = frozenset(("decision", "scope", "risk", "confidence", "reason"))

# Floors that no configuration can lower.
CONFIDENCE_FLOOR = 0.75
RISK_CEILING = "medium"
CONTEXT_CHARS_MIN = 1000
CONTEXT_CHARS_MAX = 50000
TIMEOUT_MIN = 1.0
TIMEOUT_MAX = 120.0
# Extra wall-clock time past the request timeout before the gate gives up.
DEADLINE_MARGIN = 5.0

DEFAULTS = {
    "enabled": True,
    "provider": "openai-codex",
    "model": "gpt-5.5",
    "reasoning_effort": "low",
    "service_tier": "fast",
    "timeout": 30.0,
    "scope": "once",
    "min_confidence": 0.75,
    "max_context_chars": 12000,
    "auto_approve_max_risk": "medium",
}

# Responses API service tiers; "fast" is Hermes Box's name for "priority".
SERVICE_TIERS = {"fast": "priority", "priority": "priority", "default": "default", "flex": "flex", "auto": "auto"}

MAX_EVENTS = 12
MAX_STRING = 4000
MAX_ITEMS = 40
MAX_DEPTH = 6
MAX_KEY = 120
MAX_REASON = 500
MAX_AUDIT_COMMAND = 2000
REDACTED = "[REDACTED]"
TRUNCATED = "[TRUNCATED]"
GENESIS = "0" * 64

SYSTEM_PROMPT = (
    "You review one shell command that an autonomous coding agent wants to run "
    "inside its own disposable Linux VM. Pattern matching flagged it. "
    "Answer with exactly one JSON object and nothing else, with exactly these keys: "
    '"decision" ("approve", "escalate" or "deny"), "scope" (always "once"), '
    '"risk" ("low", "medium", "high" or "critical"), "confidence" (a number from 0.0 to 1.0) '
    'and "reason" (one short sentence). '
    "Approve only when the command is clearly safe and clearly serves the user's request. "
    "Escalate to the human when intent is unclear, when you are not confident, when the command "
    "exposes credentials, sends data off the machine, disables TLS verification, deletes or "
    "mutates data that matters, or has any other meaningful consequence. "
    "Deny only what is clearly malicious or catastrophic. "
    "Never ask for session or permanent approval: the scope is always once."
)

# ---------------------------------------------------------------------------
# Redaction and bounding

_SECRET_WORDS = r"(?:api[\s_-]?key|apikey|token|secret|passw(?:or)?d|authorization|cookie|credential)"
_SECRET_KEY = re.compile(_SECRET_WORDS, re.IGNORECASE)
_ASSIGNMENT = re.compile(
    r"(?i)(\b[\w.-]*" + _SECRET_WORDS + r"[\w.-]*[\"']?\s*[:=]\s*)"
    r"(\"[^\"]*\"|'[^']*'|(?:bearer\s+)?[^\s\"',;&|)]+)"
)
_FLAG = re.compile(r"(?i)(--?[\w-]*" + _SECRET_WORDS + r"[\w-]*\s+)(\"[^\"]*\"|'[^']*'|[^\s\"'-][^\s\"']*)")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")
_SK = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")


def redact_text(text):
    """Return text with secret-looking values replaced by [REDACTED]."""
    text = _ASSIGNMENT.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER.sub("Bearer " + REDACTED, text)
    return _SK.sub(REDACTED, text)


def redact(value, depth=0):
    """Redact and bound any JSON-like value for the review packet."""
    if depth >= MAX_DEPTH:
        return TRUNCATED
    if isinstance(value, dict):
        out = {}
        for i, (key, item) in enumerate(value.items()):
            if i >= MAX_ITEMS:
                out[TRUNCATED] = True
                break
            name = str(key)[:MAX_KEY]
            out[name] = REDACTED if _SECRET_KEY.search(name) else redact(item, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [redact(item, depth + 1) for item in list(value)[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(TRUNCATED)
        return items
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value if not isinstance(value, float) or math.isfinite(value) else str(value)
    text = value if isinstance(value, str) else repr(value)
    return redact_text(text[:MAX_STRING])


# ---------------------------------------------------------------------------
# Per-run context supplied by the patched gateway

_CONTEXT = contextvars.ContextVar("hermes_box_gate_context", default=None)


def set_current_gate_context(context):
    """Set the reviewer context for this run; returns a token for reset."""
    try:
        bounded = redact(dict(context or {}))
    except Exception:  # never break the gateway
        bounded = {}
    bounded["recent_tool_activity"] = []
    return _CONTEXT.set(bounded)


def reset_current_gate_context(token):
    """Drop the context set with set_current_gate_context."""
    try:
        _CONTEXT.reset(token)
    except Exception:
        _CONTEXT.set(None)


def append_gate_tool_event(event):
    """Record one redacted tool event; keeps the most recent MAX_EVENTS."""
    context = _CONTEXT.get()
    if context is None:
        return
    events = context.setdefault("recent_tool_activity", [])
    events.append(redact(event))
    del events[:-MAX_EVENTS]


def current_gate_context():
    """A copy of the current context (for tests and diagnostics)."""
    context = _CONTEXT.get()
    return None if context is None else json.loads(json.dumps(context))


# ---------------------------------------------------------------------------
# Settings: local config may tighten, never loosen

def _number(value, default):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        number = float(value)
    except ValueError:
        return default
    return number if math.isfinite(number) else default


def settings(config):
    """Effective gate settings from the approvals.gate mapping."""
    config = config if isinstance(config, dict) else {}
    out = dict(DEFAULTS)
    enabled = config.get("enabled", True)
    out["enabled"] = enabled is True or (isinstance(enabled, str) and enabled.strip().lower() in ("true", "yes", "on", "1"))
    for key in ("provider", "model", "reasoning_effort"):
        if isinstance(config.get(key), str) and config[key].strip():
            out[key] = config[key].strip()
    tier = config.get("service_tier", DEFAULTS["service_tier"])
    out["service_tier"] = SERVICE_TIERS.get(str(tier).strip().lower()) if tier is not None else None
    out["scope"] = config.get("scope", "once")
    out["timeout"] = min(max(_number(config.get("timeout"), DEFAULTS["timeout"]), TIMEOUT_MIN), TIMEOUT_MAX)
    chars = int(_number(config.get("max_context_chars"), DEFAULTS["max_context_chars"]))
    out["max_context_chars"] = min(max(chars, CONTEXT_CHARS_MIN), CONTEXT_CHARS_MAX)
    out["min_confidence"] = min(max(_number(config.get("min_confidence"), CONFIDENCE_FLOOR), CONFIDENCE_FLOOR), 1.0)
    risk = str(config.get("auto_approve_max_risk", RISK_CEILING)).strip().lower()
    ceiling = RISKS.index(RISK_CEILING)
    out["auto_approve_max_risk"] = RISKS[min(RISKS.index(risk), ceiling)] if risk in RISKS else RISK_CEILING
    return out


# ---------------------------------------------------------------------------
# Verdicts

def escalate(reason, risk="unknown", confidence=0.0):
    return {"decision": "escalate", "scope": "once", "risk": risk, "confidence": confidence, "reason": reason}


def normalize_verdict(text, config=None):
    """Check the reviewer's reply against the contract and the floors."""
    opts = settings(config)
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return escalate("malformed reviewer output: not JSON")
    if not isinstance(data, dict):
        return escalate("malformed reviewer output: not a JSON object")
    if set(data) != VERDICT_KEYS:
        return escalate("malformed reviewer output: fields must be exactly " + ", ".join(sorted(VERDICT_KEYS)))
    decision, scope, risk = data["decision"], data["scope"], data["risk"]
    confidence, reason = data["confidence"], data["reason"]
    if decision not in DECISIONS:
        return escalate("malformed reviewer output: unknown decision %r" % (decision,))
    if not isinstance(reason, str) or not reason.strip():
        return escalate("malformed reviewer output: empty reason")
    reason = redact_text(reason.strip()[:MAX_REASON])
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence) \
            or not 0.0 <= confidence <= 1.0:
        return escalate("malformed reviewer output: confidence must be a number from 0 to 1")
    confidence = float(confidence)
    if risk not in RISKS:
        return escalate("reviewer reported unknown risk %r" % (risk,), confidence=confidence)
    if scope != "once":
        return escalate("reviewer asked for scope %r; only once is allowed" % (scope,), risk, confidence)
    verdict = {"decision": decision, "scope": "once", "risk": risk, "confidence": confidence, "reason": reason}
    if decision != "approve":
        return verdict
    ceiling = opts["auto_approve_max_risk"]
    if RISKS.index(risk) > RISKS.index(ceiling):
        return escalate("risk %s exceeds the auto-approve ceiling %s: %s" % (risk, ceiling, reason), risk, confidence)
    if confidence < opts["min_confidence"]:
        return escalate("confidence %.2f is below the floor %.2f: %s" % (confidence, opts["min_confidence"], reason),
                        risk, confidence)
    return verdict


# ---------------------------------------------------------------------------
# Hardline blocklist (Hermes' own list when available)

_HARDLINE = [
    (re.compile(r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*\s+)+(--\s+)?(/|/\*|~/?|/(bin|boot|dev|etc|lib|proc|sbin|sys|usr|var)/?)(\s|$)"),
     "recursive delete of a system path"),
    (re.compile(r"\bmkfs(\.\w+)?\b"), "filesystem format"),
    (re.compile(r"\bdd\b.*\bof=/dev/(sd|nvme|vd|hd|xvd|mmcblk)"), "raw write to a block device"),
    (re.compile(r">\s*/dev/(sd|nvme|vd|hd|xvd)"), "redirect onto a block device"),
    (re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"), "fork bomb"),
    (re.compile(r"\bkill\s+-(9\s+)?-1\b"), "kill every process"),
    (re.compile(r"(^|[;&|]\s*|\bsudo\s+)(shutdown|reboot|halt|poweroff)\b|\binit\s+[06]\b|\bsystemctl\s+(poweroff|reboot|halt)\b"),
     "shutdown or reboot"),
]


def hardline(command):
    """(True, description) for a command no model may ever approve."""
    try:
        from tools.approval import detect_hardline_command  # Hermes' list, when installed
    except Exception:
        detect_hardline_command = None
    if detect_hardline_command is not None:
        try:
            found, description = detect_hardline_command(command)
            if found:
                return True, description
        except Exception:
            pass
    bare = bare_command_variant(command)
    for pattern, description in _HARDLINE:
        if pattern.search(command) or (bare is not None and pattern.search(bare)):
            return True, description
    return False, ""


# ---------------------------------------------------------------------------
# The managed file: Hermes' managed scope, read here where Hermes has none

MANAGED_DIR = "/etc/hermes"

# The file in the (root-owned) Hermes tree naming the managed directory, as
# the gate step recorded it (patch.ManagedPointer); the environment is not
# asked: the agent writes the .env Hermes loads into it.
MANAGED_POINTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".hermes-box-managed")


def managed_dir():
    """The managed directory: the tree's record of it (relative to the tree,
    so that a tree copied below another root reads that root's), else
    /etc/hermes."""
    try:
        with open(MANAGED_POINTER, encoding="utf-8") as f:
            record = f.read().strip()
    except (OSError, ValueError):
        return MANAGED_DIR
    if not record:
        return MANAGED_DIR
    return os.path.normpath(os.path.join(os.path.dirname(MANAGED_POINTER), record))


def managed_path():
    """config.yaml of the managed scope (never HERMES_MANAGED_DIR's)."""
    return os.path.join(managed_dir(), "config.yaml")


def load_managed():
    """The managed config as a dict; {} when there is none, or (with a
    warning, and the health check's red) when it cannot be read."""
    path = managed_path()
    try:
        import yaml

        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except FileNotFoundError:
        return {}
    except Exception as exc:
        logger.warning("managed config %s unreadable (%s): the gate's settings are not pinned", path, type(exc).__name__)
        return {}
    return data if isinstance(data, dict) else {}


def _merged(base, top):
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def overlay_managed(config):
    """config with every leaf of the managed config on top of it."""
    managed = load_managed()
    if not managed or not isinstance(config, dict):
        return config
    return _merged(config, managed)


def managed_keys():
    """The dotted leaf keys the managed config pins (as Hermes 0.17 lists them)."""
    def flatten(d, prefix):
        for key, value in d.items():
            dotted = "%s.%s" % (prefix, key) if prefix else str(key)
            if isinstance(value, dict) and value:
                yield from flatten(value, dotted)
            else:
                yield dotted
    return sorted(flatten(load_managed(), ""))


# ---------------------------------------------------------------------------
# Path-qualified commands, judged like bare ones

# Wrappers that run their arguments as a command; they are dropped, with
# their options, so the command they run stands where the lists look for it.
# Options that take a value are named (their value is dropped too).
_WRAPPERS = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "command": set(),
    "builtin": set(),
    "exec": {"-a"},
    "nice": {"-n", "--adjustment"},
    "nohup": set(),
    "setsid": set(),
    "time": {"-f", "--format", "-o", "--output"},
    "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-p"},
}
# sudo stays (the lists name it), spelled bare, with its options; the word
# after it is a command word again.
_SUDO_OPTIONS_WITH_VALUE = {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R"}
_SEPARATORS = {";", "&", "&&", "|", "||", "|&", "(", ")", "{", "}", "!", "$", "`"}
_NAME = re.compile(r"^[a-z0-9_.+-]+$")


def _bare_word(word):
    """The command word as the lists spell it: its file name, unquoted."""
    name = word.rsplit("/", 1)[-1] if "/" in word else word
    return name if name and _NAME.match(name) else word


_REDIRECTS = {">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", "&>>", ">|"}


def _bare_line(line):
    """(variant, changed) of one line: command words bare, wrappers gone,
    each command on a line of its own (where the lists anchor), the other
    words quoted as the shell reads them."""
    import shlex

    def split(posix):
        lexer = shlex.shlex(line, posix=posix, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)

    tokens, spelled = split(True), split(False)
    if len(spelled) != len(tokens):  # cannot tell how a word was spelled
        spelled = tokens
    out, changed, at_command, skip_value, wrapper = [], False, True, False, None
    for token, spelling in zip(tokens, spelled):
        if set(token) <= set(";&|()<>{}!`$"):
            if token == "$":  # $( opens a command substitution
                out.append(token)
                continue
            if token in _REDIRECTS:
                out.append(token)
                at_command, wrapper = False, None
                continue
            if out and out[-1] == "$" and token == "(":
                out[-1] = "$("
            else:
                out.append(token)
            out.append("\n")
            at_command, wrapper = True, None
            continue
        if skip_value:
            skip_value = False
            if wrapper == "sudo":
                out.append(shlex.quote(token))
            continue
        if wrapper is not None and (token.startswith("-") or (wrapper == "env" and "=" in token)):
            options = _SUDO_OPTIONS_WITH_VALUE if wrapper == "sudo" else _WRAPPERS[wrapper]
            skip_value = token in options
            if wrapper == "sudo":
                out.append(shlex.quote(token))
            continue
        if at_command and "=" in token and not token.startswith("="):  # VAR=value before the command
            out.append(shlex.quote(token))
            continue
        if at_command:
            word = _bare_word(token)
            changed = changed or word != spelling or word in _WRAPPERS
            if word in _WRAPPERS:
                wrapper = word
                continue
            wrapper = "sudo" if word == "sudo" else None
            at_command = word == "sudo"
            out.append(word)
            continue
        wrapper = None
        out.append(shlex.quote(token))
    return " ".join(out).replace(" \n ", "\n").replace(" \n", "\n"), changed


def bare_command_variant(command):
    """The command with every command word spelled bare, or None when that
    changes nothing: ``/usr/bin/sudo``, ``\\sudo``, ``"sudo"``, ``env sudo``,
    ``command sudo`` (and the other wrappers) all become ``sudo``, and so on
    for the command sudo runs.  Hermes' hardline, dangerous and deny lists
    match command words by name; this variant is checked beside the command
    itself, so a path or a wrapper does not hide a listed command.  Each
    line is read with the shell's quoting; one that does not parse gives
    None for that line (it is checked as written)."""
    lines, changed = [], False
    for line in str(command).split("\n"):
        try:
            variant, bare = _bare_line(line)
        except ValueError:
            variant, bare = line, False
        lines.append(variant if bare else line)
        changed = changed or bare
    return "\n".join(lines) if changed else None


# ---------------------------------------------------------------------------
# The model call

def call_model(**kwargs):
    """Call Hermes' auxiliary LLM client (replaced by a stub in tests)."""
    from agent.auxiliary_client import call_llm
    return call_llm(**kwargs)


def response_text(response):
    """Extract the text of a chat-completions style response (object or dict)."""
    if response is None:
        return ""
    choices = response.get("choices") if isinstance(response, dict) else getattr(response, "choices", None)
    if not choices:
        return ""
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else getattr(first, "message", None)
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def _call_with_deadline(call, kwargs, seconds):
    """Run call(**kwargs) in a daemon thread; raise TimeoutError past seconds."""
    box = {}
    ctx = contextvars.copy_context()

    def target():
        try:
            box["value"] = ctx.run(call, **kwargs)
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="hermes-box-gate", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError("reviewer did not answer within %.0fs" % seconds)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def build_packet(command, description, pattern_keys, limit):
    """The bounded, redacted review packet; ValueError if it cannot fit."""
    context = current_gate_context() or {}
    context.setdefault("cwd", os.getcwd())
    packet = {
        "command": redact_text(str(command)),
        "warning": redact_text(str(description or "")),
        "pattern_keys": [redact_text(str(k)) for k in list(pattern_keys or [])[:MAX_ITEMS]],
        "context": redact(context),
    }
    text = json.dumps(packet, separators=(",", ":"), ensure_ascii=False)
    if len(text) > limit:
        packet["context"] = {"truncated": True}
        text = json.dumps(packet, separators=(",", ":"), ensure_ascii=False)
    if len(text) > limit:
        raise ValueError("review packet of %d characters exceeds the limit of %d" % (len(text), limit))
    return text


def review_command(command, description, pattern_keys, config, call=None):
    """Review one flagged command; returns a verdict dict (never raises)."""
    try:
        verdict = _review(command, description, pattern_keys, config, call or call_model)
    except Exception as exc:  # defensive: the gate must never crash Hermes
        verdict = escalate("reviewer error: %s" % type(exc).__name__)
    try:
        audit(command, verdict)
    except Exception as exc:
        logger.warning("approval gate audit log unavailable: %s", type(exc).__name__)
        if verdict["decision"] == "approve":
            verdict = escalate("audit log unavailable (%s); not approving unaudited" % type(exc).__name__,
                               verdict["risk"], verdict["confidence"])
    return verdict


def _review(command, description, pattern_keys, config, call):
    found, what = hardline(str(command))
    if found:
        return {"decision": "deny", "scope": "once", "risk": "critical", "confidence": 1.0,
                "reason": "hardline blocklist: %s" % what}
    opts = settings(config)
    if not opts["enabled"]:
        return escalate("approval gate is disabled")
    if opts["scope"] != "once":
        return escalate("configured gate scope %r is not allowed; only once" % (opts["scope"],))
    try:
        packet = build_packet(command, description, pattern_keys, opts["max_context_chars"])
    except ValueError:
        return escalate("review context exceeds the configured limit")
    extra_body = {"reasoning": {"effort": opts["reasoning_effort"]}}
    if opts["service_tier"]:
        extra_body["service_tier"] = opts["service_tier"]
    kwargs = {
        "task": "approval_gate",
        "provider": opts["provider"],
        "model": opts["model"],
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": packet}],
        "temperature": 0,
        "max_tokens": 220,
        "timeout": opts["timeout"],
        "extra_body": extra_body,
    }
    try:
        response = _call_with_deadline(call, kwargs, opts["timeout"] + DEADLINE_MARGIN)
    except Exception as exc:
        return escalate("reviewer error: %s" % type(exc).__name__)
    return normalize_verdict(response_text(response), config)


# ---------------------------------------------------------------------------
# Audit log

def audit_path():
    explicit = os.environ.get("HERMES_GATE_AUDIT_LOG")
    if explicit:
        return explicit
    home = os.environ.get("HERMES_HOME") or "/workspace/hermes-home"
    return os.path.join(home, "logs", "gate-audit.jsonl")


def _last_line(f):
    f.seek(0, os.SEEK_END)
    size = f.tell()
    if size == 0:
        return None
    f.seek(max(0, size - 65536))
    tail = f.read()
    if not tail.endswith(b"\n"):
        raise ValueError("audit log does not end with a complete line")
    lines = tail[:-1].split(b"\n")
    if len(lines) < 2 and size > len(tail):
        raise ValueError("audit log line too long")
    return lines[-1]


def audit(command, verdict, path=None, now=None):
    """Append one verdict to the hash-chained audit log."""
    path = path or audit_path()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "r+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        last = _last_line(f)
        prev, seq = GENESIS, 1
        if last is not None:
            record = json.loads(last)
            prev = record["hash"]
            seq = record["entry"]["seq"] + 1
        text = str(command)
        when = now or datetime.datetime.now(datetime.timezone.utc)
        entry = {
            "seq": seq,
            "time": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "command_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            "command": redact_text(text[:MAX_AUDIT_COMMAND]),
            "decision": verdict["decision"],
            "risk": verdict["risk"],
            "confidence": verdict["confidence"],
            "reason": redact_text(str(verdict["reason"])[:MAX_REASON]),
            "prev": prev,
        }
        body = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        digest = hashlib.sha256(body.encode("ascii")).hexdigest()
        f.write(('{"entry":%s,"hash":"%s"}\n' % (body, digest)).encode("ascii"))
        f.flush()
        os.fsync(f.fileno())
    return digest
