# Raw HTTP exchanges on one connection, for what curl will not send (no
# Host, two Hosts, a malformed request after a good one).
# Usage: python3 raw_http.py PORT REQUEST1 [REQUEST2 ...]
#   each REQUEST is a Python string literal (escapes allowed) sent as is;
#   prints each response's status line and headers, one block per response,
#   blocks separated by a line "--".
import ast, socket, sys

def read_response(f):
    lines = []
    status = f.readline()
    if not status:
        return None
    lines.append(status.decode('latin-1').rstrip('\r\n'))
    length = 0
    while True:
        h = f.readline().decode('latin-1').rstrip('\r\n')
        if not h:
            break
        lines.append(h)
        if h.lower().startswith('content-length:'):
            length = int(h.split(':', 1)[1])
    if length and not status.split()[1].startswith(b'1') and b' 204 ' not in status:
        f.read(length)
    return lines

port = int(sys.argv[1])
s = socket.create_connection(('127.0.0.1', port), timeout=5)
f = s.makefile('rb')
out = []
for raw in sys.argv[2:]:
    try:
        s.sendall(ast.literal_eval(raw).encode('latin-1'))
        r = read_response(f)
    except OSError as e:
        r = ['ERROR %s' % e]
    if r is None:
        out.append('CLOSED')
        break
    out.append('\n'.join(r))
print('\n--\n'.join(out))
