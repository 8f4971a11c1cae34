"""Tests of the hermes-box-gate plugin (Hermes 0.19 smart approvals).

The first part drives the plugin against a stand-in tools.approval with the
three names it wraps, a stand-in tools.terminal_tool and a stand-in cli.py
shaped like 0.19.0's (HermesCLI reading its wait from CLI_CONFIG).  The second part (TestHermes019) imports the real
Hermes 0.19.0 tree named by HERMES_GATE_TREE_0190 (a `git archive` export;
never committed) with this interpreter and runs Hermes' own
check_all_command_guards with the box's config: it skips with a reason when
the variable is unset, except in CI (CI=true), where it fails.
"""

import ast
import contextvars
import hashlib
import importlib.util
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_DIR = os.path.join(HERE, "plugin")
REVIEWER = os.path.join(HERE, "..", "patch", "gated_approval.py")
TREE = os.environ.get("HERMES_GATE_TREE_0190", "")
IN_CI = os.environ.get("CI") == "true"


def _patch_suite():
    """The source patch's suite, for its module loader, its backends and the
    control it shares with this one."""
    spec = importlib.util.spec_from_file_location("hermes_box_patch_suite", os.path.join(HERE, "..", "patch", "test_gated_approval.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PATCH_SUITE = _patch_suite()
CONTAINER_BACKENDS, SANDBOX_BACKENDS = PATCH_SUITE.CONTAINER_BACKENDS, PATCH_SUITE.SANDBOX_BACKENDS

BOX_CONFIG = """\
approvals:
  mode: smart
  timeout: 300
  cron_mode: deny
auxiliary:
  approval:
    provider: openai-codex
    model: gpt-5.5
    reasoning_effort: low
    timeout: 30
    extra_body:
      service_tier: priority
plugins:
  enabled:
  - hermes-box-gate
security:
  tirith_enabled: false
terminal:
  backend: local
"""


def load_plugin(tmp):
    """Import the plugin as a package, the way Hermes' loader does."""
    pkg = os.path.join(tmp, "hermes_box_gate_under_test")
    os.makedirs(pkg)
    shutil.copy(os.path.join(PLUGIN_DIR, "gate_plugin.py"), os.path.join(pkg, "__init__.py"))
    shutil.copy(REVIEWER, pkg)
    sys.path.insert(0, tmp)
    for name in list(sys.modules):
        if name.startswith("hermes_box_gate_under_test"):
            del sys.modules[name]
    import hermes_box_gate_under_test as plugin
    return plugin


# A stand-in for Hermes 0.19.0's cli.py, in the shape the plugin relies on:
# a module-level set_approval_callback that looks the terminal tool's up at
# call time, and HermesCLI._approval_callback, which serialises prompts on
# its lock and reads its wait from CLI_CONFIG["approvals"]["timeout"] as it
# starts, then waits for an answer on the prompt's queue until the deadline.
STANDIN_CLI = """
import queue
import time

CLI_CONFIG = {"approvals": {"mode": "smart", "timeout": 300}}


def set_approval_callback(cb):
    return TERMINAL.set_approval_callback(cb)


class HermesCLI:
    def _approval_callback(self, command, description, *, allow_permanent=True, smart_denied=False):
        with self._approval_lock:
            wait = int(CLI_CONFIG.get("approvals", {}).get("timeout", 60))
            answers = queue.Queue()
            self._approval_deadline = time.monotonic() + wait
            self._approval_state = {"command": command, "response_queue": answers}
            try:
                return answers.get(timeout=wait)
            except queue.Empty:
                return "deny"
            finally:
                self._approval_state = None
                self._approval_deadline = 0
"""


def standin_cli(terminal):
    module = types.ModuleType("cli")
    module.TERMINAL = terminal
    exec(compile(STANDIN_CLI, "standin_cli.py", "exec"), module.__dict__)
    return module


def real_cli(tree, config):
    """HermesCLI with the real _approval_callback and _approval_choices of
    the tree's cli.py, and its module-level set_approval_callback, compiled
    from that file into a namespace holding CLI_CONFIG (the rest of cli.py
    needs packages this interpreter may lack)."""
    path = os.path.join(tree, "cli.py")
    with open(path) as f:
        module_ast = ast.parse(f.read(), path)
    top = {n.name: n for n in module_ast.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    methods = {n.name: n for n in top["HermesCLI"].body if isinstance(n, ast.FunctionDef)}
    cls = ast.ClassDef(name="HermesCLI", bases=[], keywords=[], decorator_list=[],
                       body=[methods["_approval_callback"], methods["_approval_choices"]])
    tree_ast = ast.fix_missing_locations(ast.Module(body=[top["set_approval_callback"], cls], type_ignores=[]))
    module = types.ModuleType("cli")
    module.__dict__.update(CLI_CONFIG=config, queue=queue, _cprint=lambda *a, **k: None, _DIM="", _RST="")
    exec(compile(tree_ast, path, "exec"), module.__dict__)
    return module


def new_cli(module):
    """A HermesCLI instance with the attributes its prompt uses."""
    cli = module.HermesCLI.__new__(module.HermesCLI)
    cli._approval_lock = threading.Lock()
    cli._approval_state = None
    cli._approval_deadline = 0
    cli._paint_now = lambda: None
    cli._persist_prompt_summary = lambda *a, **k: None
    return cli


def answer(cli, run, choice="deny"):
    """Runs run() on another thread (as Hermes runs the agent), waits for
    the CLI prompt it opens, and answers it; returns the seconds the prompt
    had left when it opened, and what run() returned."""
    got = {}

    def work():
        try:
            got["result"] = run()
        except BaseException as exc:  # reported below
            got["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    for _ in range(1000):  # at most 10 s
        state = cli._approval_state
        if state is not None:
            break
        if not worker.is_alive():
            raise AssertionError("the CLI prompt never opened: %r" % (got,))
        time.sleep(0.01)
    else:
        raise AssertionError("the CLI prompt never opened")
    left = cli._approval_deadline - time.monotonic()
    state["response_queue"].put(choice)
    worker.join(10)
    if worker.is_alive():
        raise AssertionError("the CLI prompt did not return after the answer")
    return left, got.get("result")


def reply(decision="approve", risk="low", confidence=0.9, reason="builds the project", **extra):
    body = {"decision": decision, "scope": "once", "risk": risk, "confidence": confidence, "reason": reason}
    body.update(extra)
    return {"choices": [{"message": {"content": json.dumps(body)}}]}


class Stub:
    def __init__(self, response=None, error=None):
        self.response, self.error, self.calls = response, error, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if self.error:
            raise self.error
        return self.response


def read_chain(path):
    """Verify the audit chain; returns the entries."""
    prev, entries = "0" * 64, []
    with open(path, "rb") as f:
        for line in f:
            record = json.loads(line)
            body = json.dumps(record["entry"], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
            if hashlib.sha256(body.encode()).hexdigest() != record["hash"] or record["entry"]["prev"] != prev:
                raise AssertionError("audit chain broken at seq %s" % record["entry"]["seq"])
            prev = record["hash"]
            entries.append(record["entry"])
    return entries


class PluginCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.plugin = load_plugin(self.tmp)
        self.addCleanup(lambda: sys.path.remove(self.tmp) if self.tmp in sys.path else None)
        self.audit = os.path.join(self.tmp, "audit.jsonl")
        os.environ["HERMES_GATE_AUDIT_LOG"] = self.audit
        self.addCleanup(os.environ.pop, "HERMES_GATE_AUDIT_LOG", None)

    def with_reply(self, response=None, error=None):
        stub = Stub(response, error)
        saved = self.plugin.hermes_call
        self.plugin.hermes_call = stub
        self.addCleanup(setattr, self.plugin, "hermes_call", saved)
        return stub


class FakeApproval(types.SimpleNamespace):
    pass


class TestPluginAlone(PluginCase):
    def fake(self):
        asked = []

        def smart(command, description):
            return "escalate"

        def wait(session_key, notify_cb, approval_data, surface="gateway"):
            asked.append(dict(approval_data))
            return {"resolved": True, "choice": "once"}

        def prompt(command, description, timeout_seconds=None, allow_permanent=True, approval_callback=None,
                   smart_denied=False):
            asked.append({"command": command, "description": description, "timeout": timeout_seconds})
            return "once"

        def variants(command):
            yield command.lower()

        fake = FakeApproval(_smart_approve=smart, _await_gateway_decision=wait, prompt_dangerous_approval=prompt,
                            _command_detection_variants=variants)
        return fake, asked

    def terminal(self):
        """A stand-in tools.terminal_tool: the per-thread callback slot."""
        slot = threading.local()

        def set_approval_callback(cb):
            slot.approval = cb

        return FakeApproval(set_approval_callback=set_approval_callback,
                            _get_approval_callback=lambda: getattr(slot, "approval", None))

    def test_install_wraps_every_name_once(self):
        fake, _ = self.fake()
        terminal = self.terminal()
        self.assertFalse(self.plugin.installed(fake, terminal))
        self.plugin.install(fake, terminal)
        first, setter = fake._smart_approve, terminal.set_approval_callback
        self.plugin.install(fake, terminal)
        self.assertIs(fake._smart_approve, first)
        self.assertIs(terminal.set_approval_callback, setter)
        self.assertTrue(self.plugin.installed(fake, terminal))
        terminal.set_approval_callback = setter.__wrapped__
        self.assertFalse(self.plugin.installed(fake, terminal))

    def test_detection_variants_add_the_bare_spelling(self):
        fake, _ = self.fake()
        self.plugin.install(fake, self.terminal())
        for command, bare in (("/usr/bin/sudo id", "sudo id"), ("\\sudo id", "sudo id"), ('"sudo" id', "sudo id"),
                              ("env sudo id", "sudo id"), ("command sudo id", "sudo id"),
                              ("env FOO=1 /usr/bin/sudo -u root /bin/rm -rf /", "sudo -u root rm -rf /")):
            with self.subTest(command):
                self.assertEqual(list(fake._command_detection_variants(command)), [command.lower(), bare])
        self.assertEqual(list(fake._command_detection_variants("sudo id")), ["sudo id"])

    def test_escalation_reason_reaches_the_gateway_prompt(self):
        fake, asked = self.fake()
        self.plugin.install(fake, self.terminal())
        self.with_reply(reply(confidence=0.5))
        self.assertEqual(fake._smart_approve("rm -r build", "recursive delete"), "escalate")
        fake._await_gateway_decision("s", None, {"command": "rm -r build", "description": "recursive delete"})
        self.assertIn("Approval reviewer: escalate", asked[0]["description"])
        self.assertIn("below the floor 0.75", asked[0]["description"])

    def test_reason_is_used_once(self):
        fake, asked = self.fake()
        self.plugin.install(fake, self.terminal())
        self.with_reply(reply(risk="high"))
        fake._smart_approve("rm -r build", "recursive delete")
        fake.prompt_dangerous_approval("rm -r build", "recursive delete")
        fake.prompt_dangerous_approval("rm -r other", "recursive delete")
        self.assertIn("exceeds the auto-approve ceiling", asked[0]["description"])
        self.assertEqual(asked[1]["description"], "recursive delete")

    def test_cli_prompt_waits_the_seeds_60s(self):
        fake, asked = self.fake()
        self.plugin.install(fake, self.terminal())
        fake.prompt_dangerous_approval("rm -r build", "d")
        fake.prompt_dangerous_approval("rm -r build", "d", timeout_seconds=5)
        self.assertEqual([a["timeout"] for a in asked], [60, 5])

    def test_denial_never_asks_the_owner(self):
        fake, asked = self.fake()
        self.plugin.install(fake, self.terminal())
        self.with_reply(reply(decision="deny", risk="high", reason="wipes the data"))
        self.assertEqual(fake._smart_approve("rm -r data", "recursive delete"), "deny")
        got = fake._await_gateway_decision("s", None, {"command": "rm -r data", "description": "d", "smart_denied": True})
        self.assertEqual(got["choice"], "deny")
        self.assertIn("wipes the data", got["reason"])
        self.assertEqual(fake.prompt_dangerous_approval("rm -r data", "d", smart_denied=True), "deny")
        self.assertEqual(asked, [])

    def test_hooks_audit_the_human(self):
        self.plugin.on_pre_approval_request(command="rm -r x", description="d\nApproval reviewer: ...", surface="gateway")
        self.plugin.on_post_approval_response(command="rm -r x", description="d", surface="gateway", choice="once")
        self.plugin.on_post_approval_response(command="rm -r x", description="d", surface="smart", choice="smart_approve")
        entries = read_chain(self.audit)
        self.assertEqual([e["decision"] for e in entries], ["human-asked:gateway", "human:once"])

    def test_register_wires_both_hooks(self):
        hooks = {}
        ctx = types.SimpleNamespace(register_hook=lambda name, cb: hooks.setdefault(name, cb))
        fake, _ = self.fake()
        terminal = self.terminal()
        saved = self.plugin.install
        self.plugin.install = lambda: saved(fake, terminal)
        self.addCleanup(setattr, self.plugin, "install", saved)
        self.plugin.register(ctx)
        self.assertEqual(sorted(hooks), ["post_approval_response", "pre_approval_request"])
        self.assertTrue(self.plugin.installed(fake, terminal))

    def test_chat_prompt_waits_60s_while_the_gateway_keeps_300(self):
        # Hermes 0.19.0's interactive chat: HermesCLI registers its bound
        # _approval_callback with the terminal tool, and the callback reads
        # its wait from CLI_CONFIG (300, the gateway's), not from
        # prompt_dangerous_approval's timeout_seconds.
        fake, _ = self.fake()
        terminal = self.terminal()
        self.plugin.install(fake, terminal)  # plugins load before cli.py
        cli_module = standin_cli(terminal)
        cli = new_cli(cli_module)
        cli_module.set_approval_callback(cli._approval_callback)
        registered = terminal._get_approval_callback()
        for name, prompt in (("registered callback", lambda: registered("rm -r build", "d")),
                             ("method", lambda: cli._approval_callback("rm -r build", "d"))):
            with self.subTest(name):
                left, choice = answer(cli, prompt, "once")
                self.assertEqual(choice, "once")
                self.assertTrue(55 < left <= 60, "the chat prompt waits %.1f s, want 60" % left)
                self.assertEqual(cli_module.CLI_CONFIG["approvals"]["timeout"], 300)
        self.assertTrue(self.plugin.cli_installed(cli_module.HermesCLI))

    def test_chat_prompt_wrapped_when_cli_is_loaded_first(self):
        fake, _ = self.fake()
        terminal = self.terminal()
        cli_module = standin_cli(terminal)
        saved = sys.modules.get("cli")
        sys.modules["cli"] = cli_module
        self.addCleanup(lambda: sys.modules.__setitem__("cli", saved) if saved else sys.modules.pop("cli", None))
        self.plugin.install(fake, terminal)
        self.assertTrue(self.plugin.cli_installed(cli_module.HermesCLI))
        cli = new_cli(cli_module)
        left, _ = answer(cli, lambda: cli._approval_callback("rm -r build", "d"))
        self.assertTrue(55 < left <= 60, "the chat prompt waits %.1f s, want 60" % left)

    def test_other_callbacks_pass_through(self):
        fake, _ = self.fake()
        terminal = self.terminal()
        self.plugin.install(fake, terminal)

        def gateway_callback(command, description):
            return "once"

        terminal.set_approval_callback(gateway_callback)
        self.assertIs(terminal._get_approval_callback(), gateway_callback)


@unittest.skipUnless(TREE or IN_CI, "HERMES_GATE_TREE_0190 names no Hermes 0.19.0 tree (export one with git archive)")
class TestHermes019(PluginCase):
    """Hermes 0.19.0's own approval flow with the box's config and the plugin."""

    def setUp(self):
        super().setUp()
        if not TREE:
            self.fail("CI needs HERMES_GATE_TREE_0190 (the real Hermes 0.19.0 tree)")
        home = os.path.join(self.tmp, "home")
        os.makedirs(home)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write(BOX_CONFIG)
        self.env("HERMES_HOME", home)
        self.env("HERMES_INTERACTIVE", "1")
        self.env("TIRITH_ENABLED", "0")
        if TREE not in sys.path:
            sys.path.insert(0, TREE)
        import tools.approval as approval
        import tools.terminal_tool as terminal
        self.approval, self.terminal = approval, terminal
        self.asked = []

        def human(command, description, *args, **kwargs):
            self.asked.append(description)
            return "deny"

        self.real_prompt = approval.prompt_dangerous_approval
        for name in ("_command_detection_variants", "_smart_approve", "_await_gateway_decision",
                     "prompt_dangerous_approval"):
            self.addCleanup(setattr, approval, name, getattr(approval, name))
        self.addCleanup(setattr, terminal, "set_approval_callback", terminal.set_approval_callback)
        approval.prompt_dangerous_approval = human
        self.plugin.install(approval, terminal)

    def env(self, name, value):
        old = os.environ.get(name)
        os.environ[name] = value
        self.addCleanup(lambda: os.environ.__setitem__(name, old) if old is not None else os.environ.pop(name, None))

    def guard(self, command="rm -r ./build"):
        return self.approval.check_all_command_guards(command, "local")

    def test_mode_is_smart_from_the_config(self):
        self.assertEqual(self.approval._get_approval_mode(), "smart")

    def test_path_qualified_commands_meet_every_list(self):
        """Hermes 0.19.0's own hardline, deny and dangerous lists, through
        the plugin, judge every spelling of a command like the bare one."""
        with open(os.path.join(os.environ["HERMES_HOME"], "config.yaml"), "w") as f:
            f.write(BOX_CONFIG.replace("approvals:\n", "approvals:\n  deny:\n    - 'sudo *'\n", 1))
        spellings = ("/usr/bin/sudo", "\\sudo", '"sudo"', "'sudo'", "env sudo", "command sudo", "exec sudo",
                     "/usr/bin/env sudo", "nice -n 5 sudo")
        for spelling in spellings:
            with self.subTest(spelling):
                self.assertEqual(self.approval._match_user_deny_rule(spelling + " id"), "sudo *")
                result = self.guard(spelling + " id")
                self.assertFalse(result["approved"], result)
                self.assertTrue(result.get("user_deny"), result)
                self.assertTrue(self.approval.detect_hardline_command(spelling + " rm -rf /")[0])
        for command, bare in (("/sbin/reboot", "reboot"), ("command /bin/rm -rf /", "rm -rf /"),
                              ("/usr/bin/sudo /bin/rm -rf /etc", "sudo rm -rf /etc"), ("\\reboot", "reboot")):
            with self.subTest(command):
                self.assertEqual(self.approval.detect_hardline_command(command), self.approval.detect_hardline_command(bare))
                self.assertTrue(self.approval.detect_hardline_command(command)[0])
        for command, bare in (("/usr/bin/chmod 777 /etc/passwd", "chmod 777 /etc/passwd"),
                              ("env /usr/bin/systemctl stop sshd", "systemctl stop sshd"),
                              ("command /bin/rm -r ./build", "rm -r ./build")):
            with self.subTest(command):
                self.assertEqual(self.approval.detect_dangerous_command(command)[2],
                                 self.approval.detect_dangerous_command(bare)[2])
                self.assertTrue(self.approval.detect_dangerous_command(command)[0])
        self.assertEqual(self.approval._match_user_deny_rule("echo /usr/bin/sudo"), None)

    def test_confident_low_risk_approves_one_command_only(self):
        stub = self.with_reply(reply())
        for _ in range(2):
            result = self.guard()
            self.assertTrue(result["approved"], result)
            self.assertTrue(result.get("smart_approved"))
        self.assertEqual(len(stub.calls), 2, "the second identical command must be reviewed again")
        self.assertEqual(self.asked, [])
        entries = read_chain(self.audit)
        self.assertEqual([e["decision"] for e in entries], ["approve", "approve"])
        self.assertEqual(entries[1]["seq"], 2)

    def test_denial_blocks_without_asking(self):
        self.with_reply(reply(decision="deny", risk="critical", reason="erases the disk"))
        result = self.guard()
        self.assertFalse(result["approved"])
        self.assertIn("Do NOT retry", result["message"])
        self.assertEqual(self.asked, [])

    def test_gateway_denial_blocks_without_asking(self):
        # A chat-platform turn as the gateway runs it: the session's
        # platform and key bound in gateway.session_context, a notify
        # callback registered for the session (the chat the owner would be
        # asked in), not the interactive CLI.  Hermes 0.19.0 would put a
        # smart denial to the owner there; the seed's denial is final.
        from gateway import session_context
        self.env("HERMES_INTERACTIVE", "")
        self.addCleanup(setattr, session_context, "_session_context_engaged",
                        session_context._session_context_engaged)
        stub = self.with_reply(reply(decision="deny", risk="critical", reason="erases the disk"))
        key = "agent:main:telegram:dm:1"
        notified = []

        def notify(data):  # the owner, asked in the chat, would approve at once
            notified.append(dict(data))
            self.approval.resolve_gateway_approval(key, "once")

        self.approval.register_gateway_notify(key, notify)
        self.addCleanup(self.approval.unregister_gateway_notify, key)
        hooks = []
        saved_hook = self.approval._fire_approval_hook
        self.approval._fire_approval_hook = lambda name, **kw: hooks.append((name, kw.get("surface"))) or saved_hook(name, **kw)
        self.addCleanup(setattr, self.approval, "_fire_approval_hook", saved_hook)

        def turn():
            session_context.set_session_vars(platform="telegram", chat_id="1", session_key=key)
            self.approval.set_current_session_key(key)
            gateway = self.approval._is_gateway_approval_context() and not self.approval._is_interactive_cli()
            return gateway, self.guard("rm -r ./data")

        gateway, result = contextvars.copy_context().run(turn)
        self.assertTrue(gateway, "the turn did not run as a gateway approval context")
        self.assertEqual(len(stub.calls), 1)
        self.assertFalse(result["approved"], result)
        self.assertIn("Do NOT retry", result["message"])
        self.assertIn("erases the disk", result["deny_reason"])
        self.assertEqual(notified, [], "the owner was asked in the chat")
        self.assertEqual(self.asked, [])
        # Only Hermes' smart-verdict observer fires; no request to a person.
        self.assertEqual(hooks, [("pre_approval_request", "smart"), ("post_approval_response", "smart")])
        self.assertEqual(self.approval._gateway_queues.get(key), None)
        entries = read_chain(self.audit)
        self.assertEqual([(e["decision"], e["risk"], e["command"]) for e in entries],
                         [("deny", "critical", "rm -r ./data")])
        self.assertIn("erases the disk", entries[0]["reason"])

    def test_tui_prompt_waits_the_gateways_300(self):
        # `hermes --tui` (or display.interface: tui) runs the agent in
        # tui_gateway/server.py, whose _enable_gateway_prompts (run here
        # from the tree's own source) routes approvals through the gateway
        # path: the Ink UI is notified and the agent thread waits in
        # _await_gateway_decision for approvals.timeout, the box's 300 s,
        # not the chat prompt's 60.
        for name in ("HERMES_GATEWAY_SESSION", "HERMES_EXEC_ASK", "HERMES_INTERACTIVE"):
            self.env(name, "")
        path = os.path.join(TREE, "tui_gateway", "server.py")
        with open(path) as f:
            source = ast.parse(f.read(), path)
        enable = [n for n in source.body if isinstance(n, ast.FunctionDef) and n.name == "_enable_gateway_prompts"]
        namespace = {"os": os}
        exec(compile(ast.Module(body=enable, type_ignores=[]), path, "exec"), namespace)
        namespace["_enable_gateway_prompts"]()
        waits = []
        saved = self.approval._get_approval_timeout
        self.approval._get_approval_timeout = lambda: waits.append(saved()) or waits[-1]
        self.addCleanup(setattr, self.approval, "_get_approval_timeout", saved)
        self.with_reply(reply(risk="high", reason="rewrites history"))
        key = "tui-session"
        seen = []

        def notify(data):  # the Ink UI's approval.request; the person denies
            seen.append(dict(data))
            self.approval.resolve_gateway_approval(key, "deny")

        self.approval.register_gateway_notify(key, notify)
        self.addCleanup(self.approval.unregister_gateway_notify, key)

        def turn():
            self.approval.set_current_session_key(key)
            return self.guard("git push --force origin main")

        result = contextvars.copy_context().run(turn)
        self.assertFalse(result["approved"])
        self.assertEqual(len(seen), 1)
        self.assertIn("rewrites history", seen[0]["description"])
        self.assertEqual(self.asked, [], "the TUI took the CLI prompt")
        self.assertEqual(waits, [300], "the TUI's wait is approvals.timeout")

    def test_failures_reach_the_human_with_the_reason(self):
        cases = [
            ("malformed", Stub({"choices": [{"message": {"content": "APPROVE"}}]}), "malformed reviewer output"),
            ("timeout", Stub(error=TimeoutError("slow")), "reviewer error: TimeoutError"),
            ("low confidence", Stub(reply(confidence=0.6)), "below the floor 0.75"),
            ("high risk", Stub(reply(risk="high")), "exceeds the auto-approve ceiling"),
        ]
        for name, stub, reason in cases:
            with self.subTest(name):
                self.asked.clear()
                self.plugin.hermes_call = stub
                result = self.guard()
                self.assertFalse(result["approved"])  # the stub human said deny
                self.assertEqual(len(self.asked), 1)
                self.assertIn("Approval reviewer: escalate", self.asked[0])
                self.assertIn(reason, self.asked[0])
        entries = read_chain(self.audit)
        self.assertEqual([e["decision"] for e in entries], ["escalate"] * 4)

    def test_hardline_never_reaches_the_reviewer(self):
        stub = self.with_reply(reply())
        self.assertFalse(self.guard("rm -rf /")["approved"])
        self.assertEqual(stub.calls, [])

    def test_reviewer_uses_hermes_approval_task(self):
        calls = []
        import agent  # noqa: F401  (the tree's package, for the monkeypatch below)
        fake_aux = types.ModuleType("agent.auxiliary_client")
        fake_aux.call_llm = lambda **kw: calls.append(kw) or reply()
        fake_aux._get_task_timeout = lambda task: 30.0
        saved = sys.modules.get("agent.auxiliary_client")
        sys.modules["agent.auxiliary_client"] = fake_aux
        self.addCleanup(lambda: sys.modules.__setitem__("agent.auxiliary_client", saved) if saved else sys.modules.pop("agent.auxiliary_client", None))
        self.assertTrue(self.guard()["approved"])
        self.assertEqual(calls[0]["task"], "approval")
        self.assertNotIn("model", calls[0])  # Hermes resolves it from auxiliary.approval

    def test_plugin_manager_loads_the_plugin_and_fires_its_hooks(self):
        # The plugin as Hermes loads it: with the bundled plugins (the box
        # installs it in the tree's plugins/, root's; here a copy of that
        # directory named by HERMES_BUNDLED_PLUGINS, so the tree stays
        # untouched), enabled by the seeded plugins.enabled, through
        # hermes_cli.plugins.
        bundled = os.path.join(self.tmp, "tree-plugins")
        target = os.path.join(bundled, "hermes-box-gate")
        os.makedirs(target)
        self.env("HERMES_BUNDLED_PLUGINS", bundled)
        shutil.copy(os.path.join(PLUGIN_DIR, "gate_plugin.py"), os.path.join(target, "__init__.py"))
        shutil.copy(os.path.join(PLUGIN_DIR, "plugin.yaml"), target)
        shutil.copy(REVIEWER, target)
        for module, name in [(self.approval, n) for n in ("_command_detection_variants", "_smart_approve",
                                                          "_await_gateway_decision", "prompt_dangerous_approval")] + \
                [(self.terminal, "set_approval_callback")]:
            original = getattr(getattr(module, name), "__wrapped__", None)
            if original is not None:
                setattr(module, name, original)  # undo the direct install of setUp
        from hermes_cli import plugins
        plugins.discover_plugins(force=True)
        self.addCleanup(plugins.discover_plugins, True)
        loaded = plugins.get_plugin_manager()._plugins["hermes-box-gate"]
        self.assertTrue(loaded.enabled, loaded.error)
        self.assertEqual((loaded.manifest.source, os.path.realpath(loaded.manifest.path)),
                         ("bundled", os.path.realpath(target)))
        self.assertEqual(sorted(loaded.hooks_registered), ["post_approval_response", "pre_approval_request"])
        self.assertTrue(loaded.module.installed(self.approval))
        loaded.module.hermes_call = Stub(reply(risk="high", reason="rewrites history"))
        result = self.guard("git push --force origin main")
        self.assertFalse(result["approved"])  # the stub human said deny
        self.assertIn("rewrites history", self.asked[-1])
        decisions = [e["decision"] for e in read_chain(self.audit)]
        self.assertEqual(decisions, ["escalate", "human-asked:cli", "human:deny"])

    def test_chat_prompt_waits_60s_while_the_gateway_keeps_300(self):
        # Hermes' own terminal-tool guard (check_all_command_guards with the
        # thread's registered callback), its own prompt_dangerous_approval,
        # and the real HermesCLI._approval_callback
        # and set_approval_callback of the tree's cli.py, with the box's
        # config (approvals.timeout: 300, the gateway's wait).
        from hermes_cli.config import load_config
        self.approval.prompt_dangerous_approval = self.real_prompt
        self.plugin.install(self.approval, self.terminal)
        cli_module = real_cli(TREE, load_config())
        cli = new_cli(cli_module)
        self.with_reply(reply(risk="high", reason="deletes the build"))

        def chat_turn():  # the agent thread of a chat turn, as the terminal tool guards
            cli_module.set_approval_callback(cli._approval_callback)
            return self.terminal._check_all_guards("rm -r ./build", "local")

        left, result = answer(cli, chat_turn, "deny")
        self.assertTrue(55 < left <= 60, "the chat prompt waits %.1f s, want 60" % left)
        self.assertFalse(result["approved"])
        self.assertEqual(self.approval._get_approval_timeout(), 300)  # the gateway's wait
        self.assertEqual(cli_module.CLI_CONFIG["approvals"]["timeout"], 300)
        self.assertTrue(self.plugin.cli_installed(cli_module.HermesCLI))

    def test_gateway_prompt_carries_the_reason(self):
        self.env("HERMES_INTERACTIVE", "")
        self.env("HERMES_EXEC_ASK", "1")
        self.with_reply(reply(risk="high", reason="touches the database"))
        seen = []
        key = "hermes-box-test"

        def notify(data):
            seen.append(dict(data))
            self.approval.resolve_gateway_approval(key, "deny")

        token = self.approval.set_current_session_key(key)
        self.addCleanup(self.approval.reset_current_session_key, token)
        self.approval.register_gateway_notify(key, notify)
        self.addCleanup(self.approval.unregister_gateway_notify, key)
        result = self.guard()
        self.assertFalse(result["approved"])
        self.assertIn("touches the database", seen[0]["description"])
        decisions = [e["decision"] for e in read_chain(self.audit)]
        self.assertEqual(decisions[0], "escalate")

    def test_container_backends_are_reviewed(self):
        """On the patched tree, TERMINAL_ENV (which the agent can write into
        $HERMES_HOME/.env) naming a container or cloud backend skips nothing:
        the terminal's guard and execute_code send the command to the
        reviewer, and check_dangerous_command asks the human."""
        self.patched_tree()
        stub = self.with_reply(reply())
        for backend in CONTAINER_BACKENDS:
            with self.subTest(backend):
                self.env("TERMINAL_ENV", backend)
                env_type = self.terminal._get_env_config()["env_type"]
                self.assertEqual(env_type, backend)
                reviews = len(stub.calls)
                result = self.terminal._check_all_guards("rm -r ./build", env_type)
                self.assertTrue(result.get("smart_approved"), result)
                self.assertEqual(len(stub.calls), reviews + 1)
                self.assertFalse(self.approval.check_dangerous_command("rm -r ./build", env_type)["approved"])
        self.env("HERMES_INTERACTIVE", "")
        self.env("HERMES_EXEC_ASK", "1")
        for backend in SANDBOX_BACKENDS:
            with self.subTest(backend):
                reviews = len(stub.calls)
                self.approval.check_execute_code_guard("print(1)", backend)
                self.assertEqual(len(stub.calls), reviews + 1)

    def test_yolo_env_is_ignored(self):
        """On the patched tree, HERMES_YOLO_MODE (which Hermes loads from
        $HERMES_HOME/.env, the agent's) set as tools.approval loads leaves
        the gate on: the flagged command goes to the reviewer."""
        self.patched_tree()
        self.env("HERMES_YOLO_MODE", "1")
        patched = PATCH_SUITE.load_module(os.path.join(TREE, "tools", "approval.py"), "hermes_patched_approval")
        self.assertFalse(patched._YOLO_MODE_FROZEN)
        reviewed = []
        patched._smart_approve = lambda command, description: reviewed.append(command) or "deny"
        self.assertFalse(patched.check_all_command_guards("rm -r ./build", "local")["approved"])
        self.assertEqual(reviewed, ["rm -r ./build"])

    def test_headless_run_denies_flagged_commands(self):
        """On the patched tree, a run that is neither the CLI, the gateway
        nor ask mode (as `hermes -z` starts one) denies a flagged command and
        an execute_code script without a review; other commands still run."""
        self.patched_tree()
        reviewed = []
        self.approval._smart_approve = lambda command, description: reviewed.append(command) or "approve"
        PATCH_SUITE.assert_headless_denies(self, self.approval)
        self.assertEqual(reviewed, [])
        self.assertEqual(self.asked, [])

    def test_unpatched_hermes_skips_the_gate(self):
        """The control: Hermes 0.19.0's own tools/approval.py
        (HERMES_GATE_ORIGINAL, the tree before patching) approves those
        calls outright, and a flagged command on the local backend when
        loaded with HERMES_YOLO_MODE, and asks for it without."""
        original = os.environ.get("HERMES_GATE_ORIGINAL", "")
        if not original:
            self.need("HERMES_GATE_ORIGINAL names no unpatched Hermes 0.19.0 tree")
        self.env("HERMES_YOLO_MODE", "1")
        unpatched = PATCH_SUITE.load_module(os.path.join(original, "tools", "approval.py"), "hermes_unpatched_approval")
        unpatched._smart_approve = lambda *a, **k: "escalate"
        unpatched.prompt_dangerous_approval = lambda *a, **k: "deny"
        PATCH_SUITE.assert_unpatched_skips(self, unpatched)

    def patched_tree(self):
        if not os.path.exists(os.path.join(TREE, ".hermes-box-gated-approval")):
            self.need("HERMES_GATE_TREE_0190 is not patched (scripts/python-tests.sh runs this suite on a patched copy)")

    def need(self, why):
        """Skip for a missing prerequisite, or fail in CI."""
        if IN_CI:
            self.fail("CI needs it: " + why)
        self.skipTest(why)


if __name__ == "__main__":
    unittest.main()
