"""libpq5 through ctypes, for the test clients (pqexec.py, pqfn.py,
notify_listener.py): no driver needed. The functions every client uses are
declared here once; a client declares the others it calls itself.
"""
import ctypes
import ctypes.util
import sys

_P = ctypes.c_void_p
_COMMON = {
    "PQconnectdb": (_P, [ctypes.c_char_p]),
    "PQstatus": (ctypes.c_int, [_P]),
    "PQerrorMessage": (ctypes.c_char_p, [_P]),
    "PQbackendPID": (ctypes.c_int, [_P]),
    "PQexec": (_P, [_P, ctypes.c_char_p]),
    "PQresultStatus": (ctypes.c_int, [_P]),
    "PQresultErrorField": (ctypes.c_char_p, [_P, ctypes.c_int]),
    "PQclear": (None, [_P]),
    "PQfinish": (None, [_P]),
}


def connect(conninfo):
    """The library and a connection; exits with status 2, saying why, when it fails."""
    lib = ctypes.CDLL(ctypes.util.find_library("pq") or "libpq.so.5")
    for name, (restype, argtypes) in _COMMON.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    conn = lib.PQconnectdb(conninfo.encode())
    if lib.PQstatus(conn) != 0:  # CONNECTION_OK
        print("connect failed:", lib.PQerrorMessage(conn).decode(errors="replace"), file=sys.stderr)
        sys.exit(2)
    return lib, conn
