#!/usr/bin/env python3
"""Stand-in for bun inside the test Executor images.

`bun build ENTRY --target=bun --outdir=DIR` (the release validation) writes
DIR/serve.js. `bun run src/serve.ts` (Executor in the workspace layout) or
`bun run dist-server/serve.js` (the packaged layout) records its pid,
argv, working directory and environment in $EXECUTOR_DATA_DIR/standin.json,
then answers GET /api/health on $EXECUTOR_HOST:$PORT until it is terminated.
"""
import http.server
import json
import os
import sys


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/api/health":
            self.send_error(404)
            return
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("standin bun: " + (fmt % args) + "\n")


def build(args):
    out = [a[len("--outdir="):] for a in args if a.startswith("--outdir=")]
    if not out or "--target=bun" not in args:
        sys.exit("standin bun: want build ENTRY --target=bun --outdir=DIR")
    os.makedirs(out[0], exist_ok=True)
    with open(args[0], "rb") as src, open(os.path.join(out[0], "serve.js"), "wb") as dst:
        dst.write(src.read() or b"//")


def run(args):
    if args not in (["src/serve.ts"], ["dist-server/serve.js"]) or not os.path.isfile(args[0]):
        sys.exit("standin bun: want run src/serve.ts or dist-server/serve.js, in the selfhost dir")
    # /proc/self/environ is the environment bun was started with, before
    # Python's own locale coercion adds LC_CTYPE.
    with open("/proc/self/environ", "rb") as f:
        env = sorted(e.decode() for e in f.read().split(b"\0") if e)
    record = {"pid": os.getpid(), "argv": sys.argv, "cwd": os.getcwd(), "env": env}
    with open(os.path.join(os.environ["EXECUTOR_DATA_DIR"], "standin.json"), "w") as f:
        json.dump(record, f)
    server = http.server.HTTPServer((os.environ["EXECUTOR_HOST"], int(os.environ["PORT"])), Health)
    print("standin bun: serving on port", os.environ["PORT"], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("build", "run"):
        sys.exit("standin bun: only build and run are supported")
    {"build": build, "run": run}[sys.argv[1]](sys.argv[2:])
