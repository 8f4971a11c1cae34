#!/usr/bin/env python3
"""Stand-in Executor for the end-to-end test, run inside the guest.

It listens on 127.0.0.1:4788 (Executor's port in the box) and answers
GET /api/health and MCP over POST /mcp (initialize, notifications,
tools/list with exactly `execute` and `resume`) for any bearer key. While
the file /tmp/executor-standin.refuse-python exists it refuses clients
whose User-Agent is Python's urllib (the stand-in `hermes mcp test`), so
the agent's own check passes and Hermes' test fails.
"""
import http.server
import json
import os

REFUSE = "/tmp/executor-standin.refuse-python"


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/health":
            self.reply(200, {"status": "ok"})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/mcp":
            return self.reply(404, {"error": "not found"})
        if os.path.exists(REFUSE) and self.headers.get("User-Agent", "").startswith("Python-urllib"):
            return self.reply(503, {"error": "refusing this client"})
        if not self.headers.get("Authorization", "").startswith("Bearer ") or len(self.headers["Authorization"]) <= 7:
            return self.reply(401, {"error": "unauthorized"})
        msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if "id" not in msg:
            return self.reply(202, None)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "executor-standin", "version": "0"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result}, [("Mcp-Session-Id", "s-1")])
        if method == "tools/list":
            tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("execute", "resume")]
            return self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": tools}})
        self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}})

    def log_message(self, fmt, *args):
        print("executor stand-in:", fmt % args, flush=True)


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", 4788), Handler).serve_forever()
