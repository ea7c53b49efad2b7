#!/usr/bin/env python3
"""Listens on a channel and reads notifications as they come, the way a
client of LISTEN/NOTIFY does (an application's cache invalidation, a job
queue's worker).

    notify_listener.py CONNINFO CHANNEL WANT SECONDS HOLD [SPELLING]

SPELLING is how it listens: "plain" (a LISTEN statement, the default), "do"
(LISTEN run inside a DO block), "function" (inside an SQL function) or
"manyK" (LISTEN on K other channels first, then on CHANNEL, last). Prints
its backend's PID as soon as it listens, then "got N" once WANT notifications
have arrived or SECONDS have passed, and keeps its session HOLD seconds more;
exit status 2 when the connection or its LISTEN fails. Uses libpq5 through
ctypes (libpq_ctypes.py): no driver needed.
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
    spelling = sys.argv[6] if len(sys.argv) > 6 else "plain"
    listen = 'LISTEN "' + channel + '"'
    if spelling == "do":
        listen = "DO $$ BEGIN " + listen + "; END $$"
    elif spelling == "function":
        listen = ("CREATE FUNCTION pg_temp.listen_here() RETURNS void LANGUAGE sql AS $$ " + listen +
                  " $$; SELECT pg_temp.listen_here()")
    elif spelling.startswith("many"):
        decoys = "DO $$ BEGIN FOR i IN 1..%d LOOP EXECUTE format('LISTEN decoy%%s', i); END LOOP; END $$; "
        listen = decoys % int(spelling[4:]) + listen
    elif spelling != "plain":
        sys.exit("notify_listener.py: unknown spelling " + spelling)
    res = pq.PQexec(conn, listen.encode())
    failed = pq.PQresultStatus(res) not in (1, 2)  # PGRES_COMMAND_OK, PGRES_TUPLES_OK
    pq.PQclear(res)
    if failed:
        sys.exit(2)
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
