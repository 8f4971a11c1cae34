"""Where an installed Hermes' auxiliary client sends an openai-codex call
(the provider of the gate's reviewer on every supported release), with the
credential pool in HERMES_HOME (auth.json, the agent's) as it is: prints the
base URL the OpenAI client is built with. The openai package is a stand-in
that records it; nothing is sent. Arguments: the Hermes tree."""

import os
import sys
import types

built = []


class OpenAI:
    def __init__(self, *args, **kwargs):
        built.append(str(kwargs.get("base_url") or ""))
        self.api_key, self.base_url = kwargs.get("api_key"), kwargs.get("base_url")

    def close(self):
        pass


def main(tree):
    sys.modules["openai"] = types.SimpleNamespace(OpenAI=OpenAI, AsyncOpenAI=OpenAI)
    sys.path.insert(0, os.path.abspath(tree))
    from agent import auxiliary_client as aux
    aux._read_codex_access_token = lambda: "codex-token"
    aux.resolve_provider_client("openai-codex", model="gpt-5.5")
    print(built[0] if built else "")


if __name__ == "__main__":
    main(sys.argv[1])
