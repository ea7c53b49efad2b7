#!/usr/bin/env python3
"""Runs one statement through libpq's extended query protocol, the way a
driver does (Parse, Bind, Execute, Sync), and prints how long it took.

    pqexec.py CONNINFO QUERY_FILE [PARAM_FILE] [--prepare-then-wait SECONDS [--times N]]
    pqexec.py CONNINFO QUERY_FILE --simple

QUERY_FILE holds the statement; PARAM_FILE, if given, is sent as its one
text parameter ($1). With --prepare-then-wait, the statement is prepared
(PQprepare: Parse, Sync), the client waits, then executes it (PQexecPrepared)
N times (1). With --simple, the statement goes as one Query message (PQexec),
the simple protocol psql uses, timed without psql's own work on the answer.
Prints "ok <ms>" or "error <SQLSTATE> <ms> <message>"; exit status 0 either way
(2 when the connection fails). Uses libpq5 through ctypes: no driver needed.
"""
import ctypes
import ctypes.util
import sys
import time


def main():
    args = sys.argv[1:]
    wait = None
    times = 1
    simple = "--simple" in args
    if simple:
        args.remove("--simple")
    if "--times" in args:
        i = args.index("--times")
        times = int(args[i + 1])
        del args[i:i + 2]
    if "--prepare-then-wait" in args:
        i = args.index("--prepare-then-wait")
        wait = float(args[i + 1])
        del args[i:i + 2]
    conninfo, query_file = args[0], args[1]
    param = open(args[2], "rb").read() if len(args) > 2 else None

    lib = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
    lib.PQconnectdb.restype = ctypes.c_void_p
    lib.PQconnectdb.argtypes = [ctypes.c_char_p]
    lib.PQstatus.argtypes = [ctypes.c_void_p]
    lib.PQerrorMessage.restype = ctypes.c_char_p
    lib.PQerrorMessage.argtypes = [ctypes.c_void_p]
    params_t = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.PQexec.restype = ctypes.c_void_p
    lib.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.PQexecParams.restype = ctypes.c_void_p
    lib.PQexecParams.argtypes = params_t
    lib.PQprepare.restype = ctypes.c_void_p
    lib.PQprepare.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    lib.PQexecPrepared.restype = ctypes.c_void_p
    lib.PQexecPrepared.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib.PQresultStatus.argtypes = [ctypes.c_void_p]
    lib.PQresultErrorField.restype = ctypes.c_char_p
    lib.PQresultErrorField.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.PQclear.argtypes = [ctypes.c_void_p]
    lib.PQfinish.argtypes = [ctypes.c_void_p]

    conn = lib.PQconnectdb(conninfo.encode())
    if lib.PQstatus(conn) != 0:  # CONNECTION_OK
        print("connect failed:", lib.PQerrorMessage(conn).decode(errors="replace"), file=sys.stderr)
        return 2
    # Terse errors: a default-verbosity error makes libpq place the error's
    # position in the query text, tens of ms of the client's own for 4 MB.
    lib.PQsetErrorVerbosity.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.PQsetErrorVerbosity(conn, 0)  # PQERRORS_TERSE
    query = open(query_file, "rb").read()
    values = (ctypes.c_char_p * 1)(param) if param is not None else None
    n = 1 if param is not None else 0
    start = time.monotonic()
    if simple:
        res = lib.PQexec(conn, query)
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
    if lib.PQresultStatus(res) in (1, 2):  # COMMAND_OK, TUPLES_OK
        print("ok %.3f" % took)
    else:
        state = lib.PQresultErrorField(res, ord("C")) or b"?"
        msg = lib.PQresultErrorField(res, ord("M")) or lib.PQerrorMessage(conn)
        print("error", state.decode(), "%.3f" % took, msg.decode(errors="replace").strip())
    lib.PQclear(res)
    lib.PQfinish(conn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
