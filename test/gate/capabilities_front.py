"""A stand-in for the gate's response path until the rewriter is wired into
ogc-gate: a loopback HTTP front that relays every request to MapServer and
pipes GetCapabilities answers through build/gate/capabilities_cli (the
rewriter, fed in chunks as the gate will). Each relayed query is appended to
LOG (one line) so the test can count GetFeature pages.

    python3 capabilities_front.py PORT UPSTREAM LOG CLI [CLI ARGS...]
"""
import subprocess
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, UPSTREAM, LOG, CLI = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4:]


class Front(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(LOG, "a") as f:
            f.write(self.path + "\n")
        try:
            with urllib.request.urlopen(UPSTREAM + self.path, timeout=60) as r:
                status, ctype, body = r.status, r.headers.get("Content-Type", ""), r.read()
        except urllib.error.HTTPError as e:
            status, ctype, body = e.code, e.headers.get("Content-Type", ""), e.read()
        if "getcapabilities" in self.path.lower() and "xml" in ctype:
            body = subprocess.run(CLI, input=body, stdout=subprocess.PIPE, check=True).stdout
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Front).serve_forever()
