#!/usr/bin/env python3
"""Stand-in for the Hermes CLI's `hermes mcp test NAME`, as Hermes does it.

It reads mcp_servers.NAME (url, Authorization header) from
$HERMES_HOME/config.yaml, expands ${VAR} from $HERMES_HOME/.env, runs MCP's
initialize and tools/list against the url, and prints Hermes' report. Like
Hermes it exits 0 whether or not the test passed. It records who ran it in
$HERMES_HOME/mcp-test-standin.json.
"""
import json
import os
import re
import sys
import time
import urllib.request


def server(home, name):
    try:
        text = open(os.path.join(home, "config.yaml")).read()
    except OSError:
        return None
    m = re.search(r"^mcp_servers:\n((?:[ \t].*\n?)*)", text, re.M)
    if not m:
        return None
    block = re.search(r"^  " + re.escape(name) + r":\n((?:    .*\n?)*)", m.group(1), re.M)
    if not block:
        return None
    url = re.search(r"^    url: *(\S+)", block.group(1), re.M)
    auth = re.search(r"^      Authorization: *(.+)$", block.group(1), re.M)
    return (url.group(1) if url else None, auth.group(1).strip() if auth else "")


def dotenv(home):
    env = {}
    try:
        for line in open(os.path.join(home, ".env")):
            k, sep, v = line.strip().partition("=")
            if sep:
                env[k] = v
    except OSError:
        pass
    return env


def post(url, headers, msg):
    req = urllib.request.Request(url, data=json.dumps(msg).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read().decode()
        if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            events = ["\n".join(l[5:].lstrip() for l in ev.splitlines() if l.startswith("data:"))
                      for ev in body.split("\n\n")]
            events = [e for e in events if e]
            body = events[-1] if events else ""
        return resp.headers.get("Mcp-Session-Id"), (json.loads(body) if body else None)


def probe(url, auth):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if auth:
        headers["Authorization"] = auth
    session, _ = post(url, headers, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                                                 "clientInfo": {"name": "hermes", "version": "0"}}})
    if session:
        headers["Mcp-Session-Id"] = session
    post(url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _, res = post(url, headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    return [t["name"] for t in res["result"]["tools"]]


def main():
    if sys.argv[1:3] != ["mcp", "test"] or len(sys.argv) != 4:
        sys.exit("hermes stand-in: only `mcp test NAME` is supported")
    name, home = sys.argv[3], os.environ["HERMES_HOME"]
    with open(os.path.join(home, "mcp-test-standin.json"), "w") as f:
        json.dump({"uid": os.getuid(), "home": os.environ.get("HOME")}, f)
    srv = server(home, name)
    if srv is None or not srv[0]:
        print(f"  ✗ Server '{name}' not found in config.")
        return
    url, auth = srv
    env = dotenv(home)
    auth = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), auth)
    print(f"  Testing '{name}'...\n  Transport: HTTP → {url}")
    start = time.monotonic()
    try:
        tools = probe(url, auth)
    except Exception as exc:  # Hermes reports any failure and exits 0
        print(f"  ✗ Connection failed ({(time.monotonic() - start) * 1000:.0f}ms): {exc}")
        return
    print(f"  ✓ Connected ({(time.monotonic() - start) * 1000:.0f}ms)")
    print(f"  ✓ Tools discovered: {len(tools)}")
    for t in tools:
        print(f"    {t}")


if __name__ == "__main__":
    main()
