#!/usr/bin/env python3
"""Listens on a channel and reads notifications as they come, the way a
client of LISTEN/NOTIFY does (an application's cache invalidation, a job
queue's worker).

    notify_listener.py CONNINFO CHANNEL WANT SECONDS HOLD

Prints its backend's PID as soon as it listens, then "got N" once WANT
notifications have arrived or SECONDS have passed, and keeps its session
HOLD seconds more; exit status 2 when the connection fails. Uses libpq5 through ctypes: no driver needed.
"""
import ctypes
import ctypes.util
import select
import sys
import time


def main():
    conninfo, channel, want, secs, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    pq = ctypes.CDLL(ctypes.util.find_library("pq"))
    pq.PQconnectdb.restype = ctypes.c_void_p
    pq.PQconnectdb.argtypes = [ctypes.c_char_p]
    pq.PQstatus.argtypes = [ctypes.c_void_p]
    pq.PQexec.restype = ctypes.c_void_p
    pq.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    pq.PQclear.argtypes = [ctypes.c_void_p]
    pq.PQsocket.argtypes = [ctypes.c_void_p]
    pq.PQconsumeInput.argtypes = [ctypes.c_void_p]
    pq.PQnotifies.restype = ctypes.c_void_p
    pq.PQnotifies.argtypes = [ctypes.c_void_p]
    pq.PQfreemem.argtypes = [ctypes.c_void_p]
    pq.PQbackendPID.argtypes = [ctypes.c_void_p]
    pq.PQfinish.argtypes = [ctypes.c_void_p]
    conn = pq.PQconnectdb(conninfo.encode())
    if pq.PQstatus(conn) != 0:
        print("error connecting", flush=True)
        sys.exit(2)
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
