# A stand-in upstream for header tests: answers every request with the
# request line and headers it received as text/plain. Paths starting with
# /slow sleep 3 s and /slowish 0.8 s first (timeout and drain tests). Usage: python3 echo_upstream.py PORT
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    def _answer(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else b''
        if self.path.startswith('/slowish'):
            time.sleep(0.8)
        elif self.path.startswith('/slow'):
            time.sleep(3)
        out = ('%s %s\n' % (self.command, self.path)).encode() + bytes(self.headers) + b'\n' + body
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_HEAD = _answer
    def log_message(self, *a):
        pass

ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
