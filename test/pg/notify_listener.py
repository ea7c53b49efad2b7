#!/usr/bin/env python3
"""Listens on a channel and reads notifications as they come, the way a
client of LISTEN/NOTIFY does (an application's cache invalidation, a job
queue's worker).

    notify_listener.py CONNINFO CHANNEL WANT SECONDS HOLD

Prints its backend's PID as soon as it listens, then "got N" once WANT
notifications have arrived or SECONDS have passed, and keeps its session
HOLD seconds more; exit status 2 when the connection fails. Uses libpq5
through ctypes (libpq_ctypes.py): no driver needed.
"""
import ctypes
import select
import sys
import time

import libpq_ctypes


def main():
    conninfo, channel = sys.argv[1], sys.argv[2]
    want, secs, hold = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    pq, conn = libpq_ctypes.connect(conninfo)
    pq.PQsocket.argtypes = [ctypes.c_void_p]
    pq.PQconsumeInput.argtypes = [ctypes.c_void_p]
    pq.PQnotifies.restype = ctypes.c_void_p
    pq.PQnotifies.argtypes = [ctypes.c_void_p]
    pq.PQfreemem.argtypes = [ctypes.c_void_p]
    pq.PQclear(pq.PQexec(conn, b'LISTEN "' + channel.encode() + b'"'))
    print(pq.PQbackendPID(conn), flush=True)
    n = 0
    end = time.time() + secs
    fd = pq.PQsocket(conn)
    while n < want and time.time() < end:
        select.select([fd], [], [], 0.5)
        pq.PQconsumeInput(conn)
        while True:
            p = pq.PQnotifies(conn)
            if not p:
                break
            pq.PQfreemem(p)
            n += 1
    print("got", n, flush=True)
    time.sleep(hold)
    pq.PQfinish(conn)


if __name__ == "__main__":
    main()
