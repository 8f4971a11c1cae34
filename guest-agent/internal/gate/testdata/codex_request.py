"""Drive the hermes-box-gate reviewer through an installed Hermes 0.19.0's
own auxiliary client and print, as one JSON object, the verdict and the
request its Codex adapter sends.

TestReviewerCodexRequestRealTree runs this with the tree as the working
directory and HERMES_HOME holding the seeded config.yaml and the installed
plugin.  Only the transport is a stand-in: the Codex OAuth token reader and
the OpenAI client factory of agent.auxiliary_client are replaced, so the
adapter's responses.create(**kwargs) is captured here and answered with a
Codex Responses event stream holding an approve verdict; nothing leaves the
process.  Everything between the plugin and that call is Hermes' code:
call_llm(task="approval") resolving provider, model and extra_body from
auxiliary.approval, and _CodexCompletionsAdapter building the request.
"""

import importlib
import json
import os
import sys
import types

VERDICT = {"decision": "approve", "scope": "once", "risk": "low", "confidence": 0.9, "reason": "builds the project"}


def events():
    text = json.dumps(VERDICT)
    yield types.SimpleNamespace(type="response.output_text.delta", delta=text)
    yield types.SimpleNamespace(type="response.completed", response=types.SimpleNamespace(
        id="resp-test", status="completed", output=None, usage=None))


class Responses:
    def __init__(self, sent):
        self.sent = sent

    def create(self, **kwargs):
        self.sent.append(kwargs)
        return events()


def main():
    sys.path.insert(0, os.getcwd())
    from agent import auxiliary_client as aux
    sent, clients = [], []

    def client(*, api_key, base_url, **kwargs):
        clients.append(base_url)
        return types.SimpleNamespace(api_key=api_key, base_url=base_url, responses=Responses(sent), close=lambda: None)

    aux._read_codex_access_token = lambda: "test-token"
    aux._select_pool_entry = lambda provider: (False, None)
    aux._create_openai_client = client
    # The tree's plugins/, where the box installs the plugin, unless the test
    # names another (the installed plugin run with an unedited tree).
    plugins = os.environ.get("HBX_TEST_GATE_PLUGINS") or os.path.join(os.getcwd(), "plugins")
    sys.path.insert(0, plugins)
    plugin = importlib.import_module("hermes-box-gate")
    decision = plugin.review("rm -r ./build", "recursive delete")
    request = {k: v for k, v in sent[0].items() if k in ("model", "service_tier", "reasoning", "stream", "store", "timeout")} if sent else None
    json.dump({"decision": decision, "calls": len(sent), "baseURL": clients[:1], "request": request}, sys.stdout)


if __name__ == "__main__":
    main()
