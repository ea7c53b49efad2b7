# A stand-in upstream for header tests: answers every request with the
# request line and headers it received as text/plain. Paths starting with
# /slow sleep 3 s and /slowish 0.8 s first (timeout and drain tests).
# /fail waits 0.5 s and hangs up without an answer; /notmodified answers 304;
# /big?n=N sends N bytes of body; /chunked answers in chunks; a path with
# 'setcookie' in it answers with a Set-Cookie. delay_ms=N in the query sleeps N ms
# first; with drip=K too, the answer is K blocks of 64 kB, N ms apart (a slow stream). With ECHO_LOG set, each request line is
# appended to that file (to count upstream calls).
# Usage: python3 echo_upstream.py PORT
import os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    def _answer(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else b''
        if os.environ.get('ECHO_LOG'):
            with open(os.environ['ECHO_LOG'], 'a') as f:
                f.write('%s %s\n' % (self.command, self.path))
        q = dict(kv.split('=', 1) for kv in self.path.partition('?')[2].split('&') if '=' in kv)
        if 'drip' in q:
            k, gap = int(q['drip']), int(q.get('delay_ms', '0')) / 1000.0
            self.send_response(200)
            self.send_header('Content-Type', 'application/octet-stream')
            self.send_header('Content-Length', str(k * 65536))
            self.end_headers()
            try:
                for _ in range(k):
                    time.sleep(gap)
                    self.wfile.write(b'd' * 65536)
                    self.wfile.flush()
            except OSError:
                pass
            return
        if 'delay_ms' in q:
            time.sleep(int(q['delay_ms']) / 1000.0)
        if self.path.startswith('/fail'):
            time.sleep(0.5)
            self.close_connection = True
            return
        if self.path.startswith('/notmodified'):
            self.send_response(304)
            self.send_header('ETag', '"v1"')
            self.end_headers()
            return
        if self.path.startswith('/chunked'):
            self.protocol_version = 'HTTP/1.1'
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.send_header('Transfer-Encoding', 'chunked')
            self.send_header('Connection', 'close')
            self.end_headers()
            for piece in (b'chunk-one ', b'chunk-two ', b'chunk-three'):
                self.wfile.write(b'%x\r\n%s\r\n' % (len(piece), piece))
            self.wfile.write(b'0\r\n\r\n')
            self.close_connection = True
            return
        if self.path.startswith('/big'):
            n = int(self.path.split('n=')[1].split('&')[0])
            self.send_response(200)
            self.send_header('Content-Type', 'application/octet-stream')
            self.send_header('Content-Length', str(n))
            self.end_headers()
            block = b'x' * 65536
            while n > 0:
                self.wfile.write(block[:min(n, len(block))])
                n -= len(block)
            return
        if self.path.startswith('/slowish'):
            time.sleep(0.8)
        elif self.path.startswith('/slow'):
            time.sleep(3)
        out = ('%s %s\n' % (self.command, self.path)).encode() + bytes(self.headers) + b'\n' + body
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        if 'setcookie' in self.path:
            self.send_header('Set-Cookie', 'sess=abc123; Path=/')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_HEAD = do_OPTIONS = do_TRACE = _answer
    def log_message(self, *a):
        pass

ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
