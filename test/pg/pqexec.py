#!/usr/bin/env python3
"""Runs one statement through libpq's extended query protocol, the way a
driver does (Parse, Bind, Execute, Sync), and prints how long it took.

    pqexec.py CONNINFO QUERY_FILE [PARAM_FILE] [--prepare-then-wait SECONDS [--times N]]
    pqexec.py CONNINFO QUERY_FILE [PARAM_FILE] --sync-after SECONDS
    pqexec.py CONNINFO QUERY_FILE --simple
    ... --backend-cpu

QUERY_FILE holds the statement; PARAM_FILE, if given, is sent as its one
text parameter ($1). With --prepare-then-wait, the statement is prepared
(PQprepare: Parse, Sync), the client waits, then executes it (PQexecPrepared)
N times (1). With --sync-after, the statement goes in pipeline mode (Parse,
Bind, Describe, Execute and a Flush), its result is read, and its Sync, where
an implicit transaction commits, follows SECONDS later. With --simple, the statement goes as one Query message (PQexec),
the simple protocol psql uses, timed without psql's own work on the answer.
Prints "ok <ms>" or "error <SQLSTATE> <ms> <message>"; exit status 0 either way
(2 when the connection fails). With --backend-cpu, a second line "backend_cpu
<ms>" says how long the backend ran on a CPU meanwhile (its schedstat): what
a failed message did, which logs no duration. Uses libpq5 through ctypes
(libpq_ctypes.py): no driver needed.
"""
import ctypes
import sys
import time

import libpq_ctypes


def on_cpu_ns(schedstat):
    """The first field of /proc/PID/schedstat: ns that task has run on a CPU."""
    with open(schedstat) as f:
        return int(f.read().split()[0])


def main():
    args = sys.argv[1:]
    wait = None
    times = 1
    simple = "--simple" in args
    if simple:
        args.remove("--simple")
    backend_cpu = "--backend-cpu" in args
    if backend_cpu:
        args.remove("--backend-cpu")
    if "--times" in args:
        i = args.index("--times")
        times = int(args[i + 1])
        del args[i:i + 2]
    sync_after = None
    if "--sync-after" in args:
        i = args.index("--sync-after")
        sync_after = float(args[i + 1])
        del args[i:i + 2]
    if "--prepare-then-wait" in args:
        i = args.index("--prepare-then-wait")
        wait = float(args[i + 1])
        del args[i:i + 2]
    conninfo, query_file = args[0], args[1]
    param = open(args[2], "rb").read() if len(args) > 2 else None

    lib, conn = libpq_ctypes.connect(conninfo)
    params_t = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.PQexecParams.restype = ctypes.c_void_p
    lib.PQexecParams.argtypes = params_t
    lib.PQprepare.restype = ctypes.c_void_p
    lib.PQprepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    lib.PQexecPrepared.restype = ctypes.c_void_p
    lib.PQexecPrepared.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.PQsendQueryParams.argtypes = params_t
    for name in ("PQenterPipelineMode", "PQflush", "PQpipelineSync", "PQsendFlushRequest"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.PQgetResult.restype = ctypes.c_void_p
    lib.PQgetResult.argtypes = [ctypes.c_void_p]
    # Terse errors: a default-verbosity error makes libpq place the error's
    # position in the query text, tens of ms of the client's own for 4 MB.
    lib.PQsetErrorVerbosity.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.PQsetErrorVerbosity(conn, 0)  # PQERRORS_TERSE
    query = open(query_file, "rb").read()
    values = (ctypes.c_char_p * 1)(param) if param is not None else None
    n = 1 if param is not None else 0
    schedstat = "/proc/%d/schedstat" % lib.PQbackendPID(conn) if backend_cpu else None
    cpu_start = on_cpu_ns(schedstat) if backend_cpu else 0
    start = time.monotonic()
    if simple:
        res = lib.PQexec(conn, query)
    elif sync_after is not None:
        lib.PQenterPipelineMode(conn)
        lib.PQsendQueryParams(conn, query, n, None, values, None, None, 0)
        lib.PQsendFlushRequest(conn)
        lib.PQflush(conn)
        # The statement has run when its result is here: the wait is idle.
        res = lib.PQgetResult(conn)
        if res is not None:
            lib.PQgetResult(conn)  # the NULL that ends the statement's results
        time.sleep(sync_after)
        lib.PQpipelineSync(conn)
        # Then PIPELINE_SYNC (10), or an error before it (the commit's): the
        # first result that is not OK is kept.
        nulls = 0
        while nulls < 3:  # a broken connection answers NULL from then on
            r = lib.PQgetResult(conn)
            if r is None:
                nulls += 1
                continue
            nulls = 0
            status = lib.PQresultStatus(r)
            if status == 10:
                lib.PQclear(r)
                break
            if res is None or lib.PQresultStatus(res) in (1, 2):
                if res is not None:
                    lib.PQclear(res)
                res = r
            else:
                lib.PQclear(r)
    elif wait is None:
        res = lib.PQexecParams(conn, query, n, None, values, None, None, 0)
    else:
        res = lib.PQprepare(conn, b"s", query, n, None)
        if lib.PQresultStatus(res) == 1:  # PGRES_COMMAND_OK
            lib.PQclear(res)
            time.sleep(wait)
            start = time.monotonic()
            for k in range(times):
                res = lib.PQexecPrepared(conn, b"s", n, values, None, None, 0)
                if k == times - 1 or lib.PQresultStatus(res) not in (1, 2):
                    break
                lib.PQclear(res)
    took = (time.monotonic() - start) * 1000.0
    cpu_ms = (on_cpu_ns(schedstat) - cpu_start) / 1e6 if backend_cpu else 0.0
    if lib.PQresultStatus(res) in (1, 2):  # COMMAND_OK, TUPLES_OK
        print("ok %.3f" % took)
    else:
        state = lib.PQresultErrorField(res, ord("C")) or b"?"
        msg = lib.PQresultErrorField(res, ord("M")) or lib.PQerrorMessage(conn)
        print("error", state.decode(), "%.3f" % took, msg.decode(errors="replace").strip())
    if backend_cpu:
        print("backend_cpu %.3f" % cpu_ms)
    lib.PQclear(res)
    lib.PQfinish(conn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
