"""Regression suite for the gated-approval reviewer (gated_approval.py).

Runs with plain Python 3 and no network: the model call is always a stub.

Environment (set by ``hermes-box-agent patch hermes`` when it checks a tree):
  HERMES_GATE_MODULE       path of the module to test (default: the sibling file)
  HERMES_GATE_SOURCE       a patched Hermes tree: also check the patched files
  HERMES_GATE_INTEGRATION  "1": also drive the patched tools.approval (needs Hermes' venv)
"""

import ast
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_PATH = os.environ.get("HERMES_GATE_MODULE") or os.path.join(HERE, "gated_approval.py")
SOURCE = os.environ.get("HERMES_GATE_SOURCE", "")


def load_module(path=MODULE_PATH, name="hermes_box_gate_under_test"):
    """The Python file at path as a module of its own, loaded now."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gate = load_module()


def set_managed(test, module, directory):
    """Point module's managed scope at directory (as the gate step's record
    in the tree does) for the length of one test."""
    pointer = os.path.join(tempfile.mkdtemp(), ".hermes-box-managed")
    with open(pointer, "w", encoding="utf-8") as f:
        f.write(directory + "\n")
    saved = module.MANAGED_POINTER
    module.MANAGED_POINTER = pointer
    test.addCleanup(setattr, module, "MANAGED_POINTER", saved)


def set_env(test, name, value):
    """Set an environment variable for the length of one test."""
    old = os.environ.get(name)
    os.environ[name] = value
    test.addCleanup(lambda: os.environ.__setitem__(name, old) if old is not None else os.environ.pop(name, None))


# The backends Hermes skips approvals for; execute_code also skips vercel_sandbox.
CONTAINER_BACKENDS = ("docker", "singularity", "modal", "daytona")
SANDBOX_BACKENDS = CONTAINER_BACKENDS + ("vercel_sandbox",)


class headless:
    """A Hermes run that is neither the interactive CLI, the gateway nor ask
    mode (as `hermes -z` starts one) for one block."""

    def __init__(self, test):
        self.test = test

    def __enter__(self):
        names = ("HERMES_INTERACTIVE", "HERMES_EXEC_ASK", "HERMES_GATEWAY_SESSION", "HERMES_CRON_SESSION")
        self.saved = {name: os.environ.pop(name, None) for name in names}

    def __exit__(self, *exc):
        for name, value in self.saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


class exec_ask(headless):
    """Hermes' ask mode (HERMES_EXEC_ASK) outside the CLI for one block."""

    def __enter__(self):
        super().__enter__()
        os.environ["HERMES_EXEC_ASK"] = "1"


def reply(decision="approve", scope="once", risk="low", confidence=0.9, reason="read-only listing", **extra):
    body = {"decision": decision, "scope": scope, "risk": risk, "confidence": confidence, "reason": reason}
    body.update(extra)
    return {"choices": [{"message": {"content": json.dumps(body)}}]}


class Stub:
    """A stand-in for the model: records each call and returns a fixed reply."""

    def __init__(self, response=None, error=None, block=None):
        self.calls = []
        self.response = response if response is not None else reply()
        self.error = error
        self.block = block

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if self.block is not None:
            self.block.wait(30)
        if self.error is not None:
            raise self.error
        return self.response

    def packet(self, i=-1):
        return self.calls[i]["messages"][1]["content"]


class GateTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.log = os.path.join(self.tmp.name, "logs", "gate-audit.jsonl")
        old = os.environ.get("HERMES_GATE_AUDIT_LOG")
        os.environ["HERMES_GATE_AUDIT_LOG"] = self.log
        self.addCleanup(self._restore_env, old)

    @staticmethod
    def _restore_env(old):
        if old is None:
            os.environ.pop("HERMES_GATE_AUDIT_LOG", None)
        else:
            os.environ["HERMES_GATE_AUDIT_LOG"] = old

    def review(self, stub, command="ls -la /srv", config=None, desc="flagged", keys=("k",)):
        return gate.review_command(command, desc, list(keys), {} if config is None else config, call=stub)

    def audit_entries(self):
        with open(self.log, "rb") as f:
            return [json.loads(line) for line in f]


class TestApproveOnce(GateTestCase):
    def test_two_identical_commands_get_two_reviews(self):
        stub = Stub()
        first = self.review(stub, "python3 -c 'print(1)'")
        second = self.review(stub, "python3 -c 'print(1)'")
        self.assertEqual(first["decision"], "approve")
        self.assertEqual(second["decision"], "approve")
        self.assertEqual(first["scope"], "once")
        self.assertEqual(len(stub.calls), 2, "an approval must not be remembered")

    def test_never_touches_session_or_permanent_approvals(self):
        calls = []
        fake = types.ModuleType("tools.approval")
        fake.approve_session = lambda *a: calls.append(("session", a))
        fake.approve_permanent = lambda *a: calls.append(("permanent", a))
        fake.detect_hardline_command = lambda command: (False, "")
        package = types.ModuleType("tools")
        package.approval = fake
        saved = {name: sys.modules.get(name) for name in ("tools", "tools.approval")}
        sys.modules.update({"tools": package, "tools.approval": fake})
        try:
            self.assertEqual(self.review(Stub())["decision"], "approve")
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        self.assertEqual(calls, [])

    def test_request_shape(self):
        stub = Stub()
        self.review(stub, config={"provider": "openai-codex", "model": "gpt-5.5", "reasoning_effort": "low",
                                  "service_tier": "fast", "timeout": 30})
        call = stub.calls[0]
        self.assertEqual(call["task"], "approval_gate")
        self.assertEqual((call["provider"], call["model"]), ("openai-codex", "gpt-5.5"))
        self.assertEqual(call["extra_body"], {"reasoning": {"effort": "low"}, "service_tier": "priority"})
        self.assertEqual(call["timeout"], 30.0)
        self.assertEqual(call["temperature"], 0)
        self.assertEqual([m["role"] for m in call["messages"]], ["system", "user"])
        self.assertIn("once", call["messages"][0]["content"])

    def test_response_object_and_none_content(self):
        message = types.SimpleNamespace(content=None)
        response = types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])
        self.assertEqual(gate.response_text(response), "")
        self.assertEqual(self.review(Stub(response=response))["decision"], "escalate")


class TestEscalation(GateTestCase):
    def test_each_cause_escalates_with_reason(self):
        cases = [
            ("not json", Stub(response={"choices": [{"message": {"content": "APPROVE"}}]}), {}, "not JSON"),
            ("json list", Stub(response={"choices": [{"message": {"content": "[]"}}]}), {}, "not a JSON object"),
            ("extra field", Stub(response=reply(note="x")), {}, "fields must be exactly"),
            ("unknown decision", Stub(response=reply(decision="maybe")), {}, "unknown decision"),
            ("empty reason", Stub(response=reply(reason="  ")), {}, "empty reason"),
            ("bool confidence", Stub(response=reply(confidence=True)), {}, "confidence must be"),
            ("confidence above 1", Stub(response=reply(confidence=1.5)), {}, "confidence must be"),
            ("nan confidence", Stub(response={"choices": [{"message": {"content":
                '{"decision":"approve","scope":"once","risk":"low","confidence":NaN,"reason":"x"}'}}]}), {},
             "confidence must be"),
            ("unknown risk", Stub(response=reply(risk="spicy")), {}, "unknown risk"),
            ("scope session", Stub(response=reply(scope="session")), {}, "only once is allowed"),
            ("scope always", Stub(response=reply(scope="always")), {}, "only once is allowed"),
            ("high risk", Stub(response=reply(risk="high")), {}, "exceeds the auto-approve ceiling"),
            ("critical risk", Stub(response=reply(risk="critical")), {}, "exceeds the auto-approve ceiling"),
            ("low confidence", Stub(response=reply(confidence=0.74)), {}, "below the floor"),
            ("exception", Stub(error=RuntimeError("boom")), {}, "reviewer error: RuntimeError"),
            ("timeout error", Stub(error=TimeoutError()), {}, "reviewer error: TimeoutError"),
            ("gate disabled", Stub(), {"enabled": False}, "approval gate is disabled"),
            ("configured scope", Stub(), {"scope": "session"}, "only once"),
        ]
        for name, stub, config, reason in cases:
            with self.subTest(name):
                verdict = self.review(stub, config=config)
                self.assertEqual(verdict["decision"], "escalate", verdict)
                self.assertEqual(verdict["scope"], "once")
                self.assertIn(reason, verdict["reason"])

    def test_hung_reviewer_escalates(self):
        release = threading.Event()
        self.addCleanup(release.set)
        saved = gate.DEADLINE_MARGIN
        gate.DEADLINE_MARGIN = 0.0
        self.addCleanup(setattr, gate, "DEADLINE_MARGIN", saved)
        verdict = self.review(Stub(block=release), config={"timeout": 1})
        self.assertEqual(verdict["decision"], "escalate")
        self.assertIn("TimeoutError", verdict["reason"])

    def test_oversized_command_escalates_without_review(self):
        stub = Stub()
        verdict = self.review(stub, command="echo " + "a" * 60000, config={"max_context_chars": 12000})
        self.assertEqual(verdict["decision"], "escalate")
        self.assertIn("exceeds the configured limit", verdict["reason"])
        self.assertEqual(stub.calls, [])

    def test_unwritable_audit_log_blocks_approval(self):
        os.makedirs(self.log)  # a directory where the file should be
        verdict = self.review(Stub())
        self.assertEqual(verdict["decision"], "escalate")
        self.assertIn("audit log unavailable", verdict["reason"])


class TestDeny(GateTestCase):
    def test_denial_is_preserved(self):
        verdict = self.review(Stub(response=reply(decision="deny", risk="critical", confidence=0.99,
                                                  reason="exfiltrates ~/.ssh")))
        self.assertEqual(verdict, {"decision": "deny", "scope": "once", "risk": "critical", "confidence": 0.99,
                                   "reason": "exfiltrates ~/.ssh"})

    def test_hardline_precedes_the_model(self):
        for command in ("rm -rf /", "mkfs.ext4 /dev/vda1", ":(){ :|:& };:", "sudo reboot",
                        "dd if=/dev/zero of=/dev/sda"):
            with self.subTest(command):
                stub = Stub()
                verdict = self.review(stub, command=command)
                self.assertEqual(verdict["decision"], "deny")
                self.assertIn("hardline", verdict["reason"])
                self.assertEqual(stub.calls, [])


class TestManagedFile(unittest.TestCase):
    """The managed file's leaves win over the user's config (0.16.0 reads it here)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        set_managed(self, gate, self.dir)

    def write(self, text):
        with open(os.path.join(self.dir, "config.yaml"), "w") as f:
            f.write(text)

    def test_environment_names_no_managed_directory(self):
        """HERMES_MANAGED_DIR (which the agent's .env could set) is not asked."""
        self.write("approvals:\n  mode: gated\n")
        other = tempfile.mkdtemp()
        with open(os.path.join(other, "config.yaml"), "w") as f:
            f.write("approvals:\n  mode: 'off'\n")
        set_env(self, "HERMES_MANAGED_DIR", other)
        self.assertEqual(gate.overlay_managed({})["approvals"]["mode"], "gated")
        self.assertEqual(gate.managed_path(), os.path.join(self.dir, "config.yaml"))

    def test_leaves_win_and_siblings_stay(self):
        self.write("approvals:\n  mode: gated\n  gate:\n    model: gpt-5.5\ncommand_allowlist: []\n")
        user = {"approvals": {"mode": "off", "timeout": 5, "gate": {"model": "cheap", "scope": "once"}},
                "command_allowlist": ["*"], "other": 1}
        got = gate.overlay_managed(user)
        self.assertEqual(got, {"approvals": {"mode": "gated", "timeout": 5, "gate": {"model": "gpt-5.5", "scope": "once"}},
                               "command_allowlist": [], "other": 1})
        self.assertEqual(user["approvals"]["mode"], "off", "the caller's dict is not changed")
        self.assertEqual(gate.managed_keys(), ["approvals.gate.model", "approvals.mode", "command_allowlist"])

    def test_no_or_unreadable_file_changes_nothing(self):
        self.assertEqual(gate.overlay_managed({"a": 1}), {"a": 1})
        self.assertEqual(gate.managed_keys(), [])
        self.write("approvals: [unclosed\n")
        self.assertEqual(gate.overlay_managed({"a": 1}), {"a": 1})


class TestBareCommands(unittest.TestCase):
    """Every spelling of a command word meets the rules written for the bare one."""

    def test_spellings_of_sudo(self):
        for spelling in ("/usr/bin/sudo", "\\sudo", '"sudo"', "'sudo'", "env sudo", "command sudo", "exec sudo",
                         "builtin sudo", "nohup sudo", "nice -n 5 sudo", "/usr/bin/env -i FOO=1 sudo",
                         "time command -p /usr/bin/sudo"):
            with self.subTest(spelling):
                self.assertEqual(gate.bare_command_variant(spelling + " -u root id"), "sudo -u root id")

    def test_the_command_sudo_runs_and_every_command_of_a_line(self):
        cases = {
            "sudo /bin/rm -rf /": "sudo rm -rf /",
            "ls; /usr/bin/sudo rm -rf /etc": "ls ;\nsudo rm -rf /etc",
            "ls | /usr/bin/tee out && \\reboot": "ls |\ntee out &&\nreboot",
            "echo $(/usr/bin/id -u)": "echo $(\nid -u )\n",
            "ls\n/sbin/reboot": "ls\nreboot",
            "A=1 /bin/rm -r ./x": "A=1 rm -r ./x",
        }
        for command, want in cases.items():
            with self.subTest(command):
                self.assertEqual(gate.bare_command_variant(command), want)

    def test_arguments_and_bare_commands_are_left_alone(self):
        for command in ("sudo id", "echo /usr/bin/sudo", 'echo "rm -rf /"', "ls > /usr/bin/x", "cat 'unterminated",
                        "rm -r ./build"):
            with self.subTest(command):
                self.assertIsNone(gate.bare_command_variant(command))

    def test_hardline_fallback_judges_the_bare_command(self):
        for command in ("/sbin/reboot", "command /bin/rm -rf /", "env /sbin/mkfs.ext4 /dev/vda1"):
            with self.subTest(command):
                self.assertTrue(gate.hardline(command)[0])


class TestFloors(GateTestCase):
    WEAK = {"min_confidence": 0, "auto_approve_max_risk": "critical", "escalate_on_error": False,
            "escalate_on_low_confidence": False, "max_context_chars": 10 ** 9, "timeout": 10 ** 6}

    def test_weakened_config_cannot_lower_the_floors(self):
        opts = gate.settings(self.WEAK)
        self.assertEqual(opts["min_confidence"], 0.75)
        self.assertEqual(opts["auto_approve_max_risk"], "medium")
        self.assertEqual(opts["max_context_chars"], 50000)
        self.assertEqual(opts["timeout"], 120.0)
        for name, response in (("high risk", reply(risk="high")), ("critical", reply(risk="critical")),
                               ("0.74", reply(confidence=0.74)), ("zero", reply(confidence=0)),
                               ("garbage", {"choices": [{"message": {"content": "yes"}}]})):
            with self.subTest(name):
                self.assertEqual(self.review(Stub(response=response), config=self.WEAK)["decision"], "escalate")

    def test_stricter_config_is_honoured(self):
        strict = {"min_confidence": 0.95, "auto_approve_max_risk": "low"}
        self.assertEqual(self.review(Stub(response=reply(confidence=0.9)), config=strict)["decision"], "escalate")
        self.assertEqual(self.review(Stub(response=reply(risk="medium", confidence=0.99)),
                                     config=strict)["decision"], "escalate")
        self.assertEqual(self.review(Stub(response=reply(confidence=0.96)), config=strict)["decision"], "approve")

    def test_invalid_config_values_fall_back_safely(self):
        opts = gate.settings({"min_confidence": "nan", "auto_approve_max_risk": "whatever", "timeout": "x",
                              "max_context_chars": None, "service_tier": "warp"})
        self.assertEqual((opts["min_confidence"], opts["auto_approve_max_risk"], opts["timeout"],
                          opts["max_context_chars"], opts["service_tier"]), (0.75, "medium", 30.0, 12000, None))
        self.assertEqual(gate.settings("not a mapping")["scope"], "once")


class TestRedaction(GateTestCase):
    SECRETS = ["tok-AAAA1111", "s3cr3t-BBBB", "hunter2-CCCC", "cred-DDDD2222", "cookie-EEEE", "key-FFFF3333",
               "bearer-GGGG4444", "sk-HHHH5555iiii", "flag-JJJJ6666", "hdr-KKKK7777"]

    def test_each_secret_style_is_removed(self):
        token = gate.set_current_gate_context({
            "current_user_message": "deploy with API_KEY=key-FFFF3333 and see https://example.com/docs",
            "recent_messages": [{"role": "user", "content": 'config {"password": "hunter2-CCCC"}'}],
            "headers": {"Authorization": "anything", "Cookie": "cookie-EEEE", "X-Api-Key": "x",
                        "client_credential": "cred-DDDD2222", "my_secret": "s3cr3t-BBBB", "token": "tok-AAAA1111"},
        })
        self.addCleanup(gate.reset_current_gate_context, token)
        gate.append_gate_tool_event({"tool": "terminal", "arguments": {"cmd": "curl -H 'Authorization: Bearer hdr-KKKK7777' x"}})
        stub = Stub()
        command = "curl -H 'X: bearer bearer-GGGG4444' --token flag-JJJJ6666 https://api.example.com -d key=sk-HHHH5555iiii"
        self.review(stub, command=command)
        packet = stub.packet()
        for secret in self.SECRETS:
            self.assertNotIn(secret, packet)
        self.assertIn("https://example.com/docs", packet)
        self.assertIn("[REDACTED]", packet)
        with open(self.log) as f:
            audit_text = f.read()
        for secret in self.SECRETS:
            self.assertNotIn(secret, audit_text)

    def test_text_styles(self):
        cases = {
            "export OPENAI_API_KEY=abc123xyz": "abc123xyz",
            "password: 'pa ss'": "pa ss",
            "Authorization: Bearer abcdefgh12345": "abcdefgh12345",
            "use bearer zyxwvuts9876 now": "zyxwvuts9876",
            "sk-proj-ABCDEFGH12345678": "ABCDEFGH12345678",
            "mysql --password hunter22 db": "hunter22",
            "session_cookie=c00kie": "c00kie",
            "credential=cr3d": "cr3d",
        }
        for text, secret in cases.items():
            with self.subTest(text):
                self.assertNotIn(secret, gate.redact_text(text))


class TestContextBounds(GateTestCase):
    def test_values_are_bounded(self):
        value = gate.redact({"long": "x" * 10000, "list": list(range(100)),
                             "many": {"k%d" % i: i for i in range(100)}, "k" * 500: 1,
                             "deep": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}})
        self.assertEqual(len(value["long"]), gate.MAX_STRING)
        self.assertEqual(len(value["list"]), gate.MAX_ITEMS + 1)
        self.assertEqual(value["list"][-1], gate.TRUNCATED)
        self.assertEqual(len(value["many"]), gate.MAX_ITEMS + 1)
        self.assertIn("k" * gate.MAX_KEY, value)
        self.assertEqual(value["deep"]["a"]["b"]["c"]["d"]["e"], gate.TRUNCATED)

    def test_events_keep_the_last_twelve_and_reset_clears(self):
        token = gate.set_current_gate_context({"task_id": "t"})
        for i in range(15):
            gate.append_gate_tool_event({"tool": "t%d" % i})
        events = gate.current_gate_context()["recent_tool_activity"]
        self.assertEqual([e["tool"] for e in events], ["t%d" % i for i in range(3, 15)])
        gate.reset_current_gate_context(token)
        self.assertIsNone(gate.current_gate_context())
        gate.append_gate_tool_event({"tool": "after"})  # no context: ignored
        self.assertIsNone(gate.current_gate_context())

    def test_oversized_context_is_dropped_not_the_review(self):
        token = gate.set_current_gate_context({"recent_messages": ["y" * 3999] * 10})
        self.addCleanup(gate.reset_current_gate_context, token)
        stub = Stub()
        self.assertEqual(self.review(stub, config={"max_context_chars": 5000})["decision"], "approve")
        packet = json.loads(stub.packet())
        self.assertEqual(packet["context"], {"truncated": True})
        self.assertLessEqual(len(stub.packet()), 5000)


class TestAuditLog(GateTestCase):
    def test_chain_links_every_verdict(self):
        self.review(Stub(), command="ls")
        self.review(Stub(response=reply(decision="deny", risk="high", reason="no")), command="cat /etc/shadow")
        self.review(Stub(error=ValueError()), command="git push")
        with open(self.log, "rb") as f:
            lines = f.read().splitlines()
        prev = gate.GENESIS
        for seq, line in enumerate(lines, 1):
            record = json.loads(line)
            body = line[len(b'{"entry":'):line.rindex(b',"hash":')]
            self.assertEqual(hashlib.sha256(body).hexdigest(), record["hash"])
            self.assertEqual(record["entry"]["prev"], prev)
            self.assertEqual(record["entry"]["seq"], seq)
            prev = record["hash"]
        entries = [json.loads(line)["entry"] for line in lines]
        self.assertEqual([e["decision"] for e in entries], ["approve", "deny", "escalate"])
        self.assertEqual(entries[1]["command_sha256"], hashlib.sha256(b"cat /etc/shadow").hexdigest())
        self.assertEqual(set(entries[0]), {"seq", "time", "command_sha256", "command", "decision", "risk",
                                           "confidence", "reason", "prev"})

    def test_torn_log_refuses_to_extend(self):
        os.makedirs(os.path.dirname(self.log))
        with open(self.log, "w") as f:
            f.write('{"entry":{"seq":1')
        self.assertEqual(self.review(Stub())["decision"], "escalate")


@unittest.skipUnless(SOURCE, "HERMES_GATE_SOURCE names no patched tree")
class TestPatchedTree(unittest.TestCase):
    def read(self, rel):
        with open(os.path.join(SOURCE, rel), encoding="utf-8") as f:
            return f.read()

    def test_patched_files_parse(self):
        for rel in ("tools/approval.py", "gateway/run.py", "agent/auxiliary_client.py", "tools/gated_approval.py"):
            with self.subTest(rel):
                ast.parse(self.read(rel), rel)

    def test_gate_block_is_one_shot_and_precedes_smart_mode(self):
        text = self.read("tools/approval.py")
        start = text.index("# hermes-box:gate-decision begin")
        end = text.index("# hermes-box:gate-decision end")
        block = text[start:end]
        self.assertLess(end, text.index("# --- Phase 2.5: Smart approval"))
        self.assertNotIn("approve_session", block)
        self.assertNotIn("approve_permanent", block)
        self.assertIn("Do NOT retry", block)

    def test_tool_event_import_is_callback_local(self):
        tree = ast.parse(self.read("gateway/run.py"))
        found = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.module == "tools.gated_approval" \
                            and any(a.name == "append_gate_tool_event" for a in inner.names):
                        found.append(node.name)
        self.assertIn("progress_callback", found)
        top = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "tools.gated_approval"]
        self.assertEqual(top, [])


@unittest.skipUnless(SOURCE and os.environ.get("HERMES_GATE_INTEGRATION") == "1",
                     "HERMES_GATE_INTEGRATION=1 with a real patched Hermes tree")
class TestPatchedHermes(GateTestCase):
    def setUp(self):
        super().setUp()
        if SOURCE not in sys.path:
            sys.path.insert(0, SOURCE)
        # The mode comes from a real config.yaml read by Hermes' own code, not
        # a stub: a Hermes that normalises "gated" away (0.18+) fails here.
        home = os.environ.get("HERMES_HOME")
        if not home:
            self.skipTest("HERMES_HOME is unset")
        os.makedirs(home, exist_ok=True)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write("approvals:\n  mode: gated\n  gate:\n    enabled: true\n")
        import tools.approval as approval
        import tools.gated_approval as installed
        self.approval, self.installed = approval, installed
        self.assertEqual(approval._get_approval_mode(), "gated")
        for name, value in (("prompt_dangerous_approval", lambda *a, **k: "deny"),):
            saved = getattr(approval, name)
            setattr(approval, name, value)
            self.addCleanup(setattr, approval, name, saved)
        for var, value in (("HERMES_INTERACTIVE", "1"), ("TIRITH_ENABLED", "0")):  # no tirith download
            set_env(self, var, value)

    def with_reply(self, response):
        stub = Stub(response=response)
        saved = self.installed.call_model
        self.installed.call_model = stub
        self.addCleanup(setattr, self.installed, "call_model", saved)
        return stub

    def test_one_shot_approval(self):
        stub = self.with_reply(reply())
        for _ in range(2):
            result = self.approval.check_all_command_guards("rm -r ./build", "local")
            self.assertTrue(result["approved"], result)
            self.assertTrue(result.get("gate_approved"))
        self.assertEqual(len(stub.calls), 2)

    def test_denial_blocks_with_do_not_retry(self):
        self.with_reply(reply(decision="deny", risk="high", reason="destroys data"))
        result = self.approval.check_all_command_guards("rm -r ./build", "local")
        self.assertFalse(result["approved"])
        self.assertIn("Do NOT retry", result["message"])

    def test_escalation_reaches_the_human(self):
        self.with_reply(reply(risk="high"))
        result = self.approval.check_all_command_guards("rm -r ./build", "local")
        self.assertFalse(result["approved"])  # the stubbed human said deny

    def test_managed_file_wins_over_the_users_config(self):
        managed = tempfile.mkdtemp()
        with open(os.path.join(managed, "config.yaml"), "w") as f:
            f.write("approvals:\n  mode: gated\n  cron_mode: deny\ncommand_allowlist: []\n")
        with open(os.path.join(os.environ["HERMES_HOME"], "config.yaml"), "w") as f:
            f.write("approvals:\n  mode: 'off'\n  cron_mode: approve\ncommand_allowlist:\n- '*'\n")
        set_managed(self, self.installed, managed)
        # The environment names another directory (as a .env line would): ignored.
        set_env(self, "HERMES_MANAGED_DIR", tempfile.mkdtemp())
        self.assertEqual(self.approval._get_approval_mode(), "gated")
        self.assertEqual(self.approval._get_cron_approval_mode(), "deny")
        self.assertEqual(self.approval.load_permanent_allowlist(), set())
        set_managed(self, self.installed, tempfile.mkdtemp())  # no managed file: the user's config shows
        self.assertEqual(self.approval._get_approval_mode(), "off")
        self.assertEqual(self.approval._get_cron_approval_mode(), "approve")

    def test_path_qualified_commands_meet_hermes_lists(self):
        """The patched Hermes' hardline and dangerous lists judge every
        spelling of a command like the bare one."""
        for command, bare in (("/sbin/reboot", "reboot"), ('"rm" -rf /', "rm -rf /"), ("command /bin/rm -rf /", "rm -rf /"),
                              ("/usr/bin/sudo /sbin/shutdown -h now", "sudo shutdown -h now")):
            with self.subTest(command):
                self.assertTrue(self.approval.detect_hardline_command(bare)[0])
                self.assertEqual(self.approval.detect_hardline_command(command), self.approval.detect_hardline_command(bare))
        for command, bare in (("/usr/bin/chmod 777 /etc/passwd", "chmod 777 /etc/passwd"),
                              ("env /usr/bin/systemctl stop sshd", "systemctl stop sshd"),
                              ('"rm" -r ./build', "rm -r ./build")):
            with self.subTest(command):
                self.assertTrue(self.approval.detect_dangerous_command(bare)[0])
                self.assertEqual(self.approval.detect_dangerous_command(command), self.approval.detect_dangerous_command(bare))
        self.assertEqual(self.approval.detect_dangerous_command("echo /usr/bin/sudo"), (False, None, None))

    def test_hardline_never_reaches_the_model(self):
        stub = self.with_reply(reply())
        result = self.approval.check_all_command_guards("rm -rf /", "local")
        self.assertFalse(result["approved"])
        self.assertEqual(stub.calls, [])

    def test_container_backends_are_reviewed(self):
        """TERMINAL_ENV (which the agent can write into $HERMES_HOME/.env)
        naming a container or cloud backend skips nothing: the terminal's
        guard sends the command to the reviewer, check_dangerous_command
        asks, and execute_code in ask mode waits for an approval."""
        import tools.terminal_tool as terminal
        stub = self.with_reply(reply())
        for backend in CONTAINER_BACKENDS:
            with self.subTest(backend):
                set_env(self, "TERMINAL_ENV", backend)
                env_type = terminal._get_env_config()["env_type"]
                self.assertEqual(env_type, backend)
                reviews = len(stub.calls)
                result = terminal._check_all_guards("rm -r ./build", env_type)
                self.assertTrue(result.get("gate_approved"), result)
                self.assertEqual(len(stub.calls), reviews + 1)
                self.assertFalse(self.approval.check_dangerous_command("rm -r ./build", env_type)["approved"])
        for backend in SANDBOX_BACKENDS:
            with self.subTest(backend), exec_ask(self):
                self.assertFalse(self.approval.check_execute_code_guard("print(1)", backend)["approved"])

    def test_yolo_env_is_ignored(self):
        """HERMES_YOLO_MODE (which Hermes loads from $HERMES_HOME/.env, the
        agent's) set as tools.approval loads leaves the gate on."""
        set_env(self, "HERMES_YOLO_MODE", "1")
        patched = load_module(os.path.join(SOURCE, "tools", "approval.py"), "hermes_patched_approval")
        self.assertFalse(patched._YOLO_MODE_FROZEN)
        stub = self.with_reply(reply())
        result = patched.check_all_command_guards("rm -r ./build", "local")
        self.assertTrue(result.get("gate_approved"), result)
        self.assertEqual(len(stub.calls), 1)

    def test_headless_run_denies_flagged_commands(self):
        """In a run that is neither the CLI, the gateway nor ask mode (as
        `hermes -z` starts one) a flagged command and an execute_code script
        are denied without a review; other commands still run."""
        stub = self.with_reply(reply())
        assert_headless_denies(self, self.approval)
        self.assertEqual(stub.calls, [])

    def test_unpatched_hermes_skips_the_gate(self):
        """The control: Hermes' own tools/approval.py (HERMES_GATE_ORIGINAL,
        the tree before patching) approves those calls outright, and a
        flagged command on the local backend when loaded with
        HERMES_YOLO_MODE, and asks for it without."""
        original = os.environ.get("HERMES_GATE_ORIGINAL", "")
        if not original:
            if os.environ.get("CI") == "true":
                self.fail("CI needs HERMES_GATE_ORIGINAL (the unpatched Hermes tree)")
            self.skipTest("HERMES_GATE_ORIGINAL names no unpatched Hermes tree")
        set_env(self, "HERMES_YOLO_MODE", "1")
        unpatched = load_module(os.path.join(original, "tools", "approval.py"), "hermes_unpatched_approval")
        unpatched.prompt_dangerous_approval = lambda *a, **k: "deny"
        stub = self.with_reply(reply())
        assert_unpatched_skips(self, unpatched)
        self.assertEqual(stub.calls, [])


def assert_headless_denies(test, approval):
    """Both gate suites: the patched tools.approval, in a headless run,
    denies a flagged command (through the terminal's guard and
    check_dangerous_command) and an execute_code script, saying why, and
    approves a command no list flags."""
    with headless(test):
        for result in (approval.check_all_command_guards("rm -r ./build", "local"),
                       approval.check_execute_code_guard("print(1)", "local")):
            test.assertFalse(result["approved"], result)
            test.assertIn("BLOCKED by hermes-box", result["message"])
            test.assertIn("headless Hermes run", result["message"])
        result = approval.check_dangerous_command("rm -r ./build", "local")
        test.assertFalse(result["approved"], result)
        test.assertIn("BLOCKED", result["message"])
        test.assertEqual(approval.check_all_command_guards("ls -la ./build", "local"), {"approved": True, "message": None})


def assert_unpatched_skips(test, unpatched):
    """The control of both gate suites: Hermes' own tools/approval.py, loaded
    with HERMES_YOLO_MODE set, approves a flagged local command outright;
    without yolo it approves the same calls outright on a container or cloud
    backend and in a headless run, and asks for them on the local one."""
    skipped = {"approved": True, "message": None}
    test.assertEqual(unpatched.check_all_command_guards("rm -r ./build", "local"), skipped)
    unpatched._YOLO_MODE_FROZEN = False
    with headless(test):
        test.assertEqual(unpatched.check_all_command_guards("rm -r ./build", "local"), skipped)
        test.assertEqual(unpatched.check_dangerous_command("rm -r ./build", "local"), skipped)
        test.assertEqual(unpatched.check_execute_code_guard("print(1)", "local"), skipped)
    for backend in CONTAINER_BACKENDS:
        with test.subTest(backend):
            test.assertEqual(unpatched.check_all_command_guards("rm -r ./build", backend), skipped)
            test.assertEqual(unpatched.check_dangerous_command("rm -r ./build", backend), skipped)
    for backend in SANDBOX_BACKENDS:
        with test.subTest(backend), exec_ask(test):
            test.assertEqual(unpatched.check_execute_code_guard("print(1)", backend), skipped)
    test.assertFalse(unpatched.check_all_command_guards("rm -r ./build", "local")["approved"])
    with exec_ask(test):
        test.assertFalse(unpatched.check_execute_code_guard("print(1)", "local")["approved"])

if __name__ == "__main__":
    unittest.main()
