#!/usr/bin/env python3
"""Speaks the frontend/backend protocol on a raw socket, so that a test chooses which messages
reach the server in one write and where the client pauses: what a driver's pipelining, a Flush, a
Close or a Terminate look like to the server. libpq cannot send a Bind without an Execute, nor a
Terminate right behind one.

    rawproto.py SOCKET_PATH USER STEP...

Steps, sent in order; messages gather until `send` (or the end) writes them in one sendall:
    parse:SQL[:TYPE_OID]   Parse, the unnamed statement, with one parameter of that type
    bind[:TEXT]            Bind the unnamed portal, with one text parameter if given
    query:SQL              a simple Query
    describe  execute  sync  flush  close   (Describe, Execute, Close: the unnamed portal)
    terminate              Terminate (the connection is then closed)
    hangup                 write what has gathered and close the socket at once, reading nothing
                           (a client gone without a Terminate)
    send                   write what has gathered
    sleep:SECONDS
After the last step, reads answers until a ReadyForQuery for each Query and Sync (or end of file)
and prints the types of the messages received (ErrorResponse as E:SQLSTATE), one line. Trust
authentication only.
"""
import socket
import struct
import sys
import time


def message(kind, body=b""):
    return kind + struct.pack("!i", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


def read_message(sock, buf):
    while len(buf) < 5 or len(buf) < 1 + struct.unpack("!i", buf[1:5])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
    n = 1 + struct.unpack("!i", buf[1:5])[0]
    return (buf[:1], buf[5:n]), buf[n:]


def describe_answer(kind, body):
    if kind == b"E":
        fields = dict((f[:1], f[1:]) for f in body.split(b"\0") if f)
        return "E:" + fields.get(b"C", b"?").decode()
    return kind.decode()


def main():
    path, user, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    startup = struct.pack("!i", 196608) + cstr("user") + cstr(user) + cstr("database") + cstr("postgres") + b"\0"
    sock.sendall(struct.pack("!i", len(startup) + 4) + startup)
    buf = b""
    while True:
        m, buf = read_message(sock, buf)
        if m is None:
            print("connect failed")
            return 2
        if m[0] == b"E":
            print("connect failed", describe_answer(*m))
            return 2
        if m[0] == b"Z":
            break
    out = b""
    closed = False
    for step in steps:
        name, _, arg = step.partition(":")
        if name == "query":
            out += message(b"Q", cstr(arg))
        elif name == "parse":
            sql, _, oid = arg.partition(":")
            types = struct.pack("!hi", 1, int(oid)) if oid else struct.pack("!h", 0)
            out += message(b"P", cstr("") + cstr(sql) + types)
        elif name == "bind":
            params = struct.pack("!h", 0)
            if step.startswith("bind:"):
                v = arg.encode()
                params += struct.pack("!hi", 1, len(v)) + v
            else:
                params += struct.pack("!h", 0)
            out += message(b"B", cstr("") + cstr("") + params + struct.pack("!h", 0))
        elif name == "describe":
            out += message(b"D", b"P" + cstr(""))
        elif name == "execute":
            out += message(b"E", cstr("") + struct.pack("!i", 0))
        elif name == "sync":
            out += message(b"S")
        elif name == "flush":
            out += message(b"H")
        elif name == "close":
            out += message(b"C", b"P" + cstr(""))
        elif name == "terminate":
            out += message(b"X")
            closed = True
        elif name == "send":
            sock.sendall(out)
            out = b""
        elif name == "hangup":
            sock.sendall(out)
            sock.close()
            print("hung up")
            return 0
        elif name == "sleep":
            time.sleep(float(arg))
        else:
            print("unknown step", step)
            return 2
    if out:
        sock.sendall(out)
    got = []
    ready_for = max(1, sum(1 for step in steps if step == "sync" or step.startswith("query:")))
    sock.settimeout(60)  # a test that waits for an answer that never comes fails, it does not hang
    while True:
        try:
            m, buf = read_message(sock, buf)
        except socket.timeout:
            got.append("timeout")
            break
        if m is None:
            break
        got.append(describe_answer(*m))
        if m[0] == b"Z" and not closed:
            ready_for -= 1
            if ready_for == 0:
                break
    sock.close()
    print(" ".join(got) if got else "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
