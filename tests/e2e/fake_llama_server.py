#!/usr/bin/python3
"""A stand-in for llama.cpp's llama-server in test_bench_vs_llama_server.py: it takes the
options the bench's peer passes, checks that the files it is given are GGUF files, appends its
command line to $FAKE_LLAMA_SERVER_LOG (one JSON list per start), and answers /health and
/completion with timings chosen so that the expected figures are known: plain decoding at 100
tok/s, speculative at 100 x (1 + 0.25 x n_max) tok/s with half of the drafted tokens accepted.
It measures nothing; the real binary is exercised by test_bench_vs_llama_server_real.py."""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def opt(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def is_gguf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def main():
    argv = sys.argv[1:]
    with open(os.environ["FAKE_LLAMA_SERVER_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    model, draft = opt(argv, "-m"), opt(argv, "-md")
    for p in [model] + ([draft] if draft else []):
        if not (p and os.path.isfile(p) and is_gguf(p)):
            sys.exit(f"fake llama-server: {p} is not a GGUF file")
    n_max = int(opt(argv, "--spec-draft-n-max", "0")) if draft else 0

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.reply({"status": "ok"})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = int(req["n_predict"])
            t = {"predicted_n": n, "predicted_ms": n * 10.0 / (1 + 0.25 * n_max)}
            if n_max:
                t.update(draft_n=2 * n, draft_n_accepted=n)
            self.reply({"content": "same text for " + str(len(req["prompt"])), "timings": t})

    HTTPServer((opt(argv, "--host", "127.0.0.1"), int(opt(argv, "--port"))), Handler).serve_forever()


if __name__ == "__main__":
    main()
