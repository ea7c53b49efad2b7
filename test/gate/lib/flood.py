# Opens N idle TCP connections to 127.0.0.1:PORT from SRC (a loopback
# address, so the gate sees another client), keeps them for HOLD seconds (or
# until the file STOP exists), then prints how many the gate still held
# open ("alive N of M connected").
# Usage: python3 flood.py SRC PORT N HOLD READY_FILE STOP_FILE
import os, resource, socket, sys, time

src, port, n, hold, ready, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks = []
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.bind((src, 0))
        s.connect(('127.0.0.1', port))
        socks.append(s)
    except OSError:
        s.close()
open(ready, 'w').write('%d\n' % len(socks))
end = time.time() + hold
while time.time() < end and not os.path.exists(stop):
    time.sleep(0.05)
alive = 0
for s in socks:
    s.setblocking(False)
    try:
        if s.recv(1) == b'':
            continue
        alive += 1  # it said something; still open
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print('alive %d of %d connected' % (alive, len(socks)))
for s in socks:
    s.close()
