#!/usr/bin/env python3
"""Calls one function through libpq's fast-path interface (PQfn), the way a
client could to run a function outside any statement.

    pqfn.py [--time] CONNINFO FUNCTION_OID ARG...

Each ARG is int:N (int4), float8:X, text:S or textfile:PATH (the file's bytes
as a text argument); the result is read as an int4. Prints "ok <result>" or
"error <SQLSTATE> <message>", followed with --time by the call's own time in
ms (the connection not included); exit status 0 either way (2 when the
connection fails). Uses libpq5 through ctypes (libpq_ctypes.py): no driver
needed.
"""
import ctypes
import struct
import sys
import time

import libpq_ctypes


class _U(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_void_p), ("integer", ctypes.c_int)]


class PQArgBlock(ctypes.Structure):
    _fields_ = [("len", ctypes.c_int), ("isint", ctypes.c_int), ("u", _U)]


def main():
    timed = len(sys.argv) > 1 and sys.argv[1] == "--time"
    if timed:
        del sys.argv[1]
    lib, conn = libpq_ctypes.connect(sys.argv[1])
    lib.PQfn.restype = ctypes.c_void_p
    lib.PQfn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                         ctypes.c_int, ctypes.POINTER(PQArgBlock), ctypes.c_int]
    args = (PQArgBlock * max(1, len(sys.argv) - 3))()
    keep = []
    for i, spec in enumerate(sys.argv[3:]):
        kind, _, value = spec.partition(":")
        if kind == "int":
            args[i].len, args[i].isint, args[i].u.integer = 4, 1, int(value)
        else:
            if kind == "float8":
                raw = struct.pack("!d", float(value))
            elif kind == "textfile":
                with open(value, "rb") as f:
                    raw = f.read()
            else:
                raw = value.encode()
            buf = ctypes.create_string_buffer(raw, len(raw))
            keep.append(buf)
            args[i].len, args[i].isint, args[i].u.ptr = len(raw), 0, ctypes.cast(buf, ctypes.c_void_p)
    result = ctypes.c_int(0)
    result_len = ctypes.c_int(0)
    started = time.monotonic()
    res = lib.PQfn(conn, int(sys.argv[2]), ctypes.byref(result), ctypes.byref(result_len), 1, args,
                   len(sys.argv) - 3)
    took = " %.3f" % ((time.monotonic() - started) * 1000) if timed else ""
    if lib.PQresultStatus(res) == 1:  # PGRES_COMMAND_OK
        print("ok", (result.value if result_len.value > 0 else "null"), end=took + "\n")
    else:
        state = lib.PQresultErrorField(res, ord("C")) or b"?"
        msg = lib.PQresultErrorField(res, ord("M")) or lib.PQerrorMessage(conn)
        print("error", state.decode(), msg.decode(errors="replace") + took)
    lib.PQclear(res)
    lib.PQfinish(conn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
