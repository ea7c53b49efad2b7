#!/usr/bin/env python3
"""Checks the operator's documentation against what the server and the source really have.

An operator deploys from doc/: a setting left out of doc/configuration.md, a default or range that
drifted, a function missing from doc/sql-api.md or an SQLSTATE the extension raises that
doc/errors.md never names is a deployment that goes wrong. Reads what documented.t.sh dumped from a
running server; prints one TAP line per check and exits 1 if any failed.

usage: documented_check.py ROOT SETTINGS_TSV OBJECTS_TSV ERRCODES_H
"""
import math
import re
import sys
from pathlib import Path

failed = False


def check(ok, what, detail=""):
    global failed
    print(("ok - " if ok else "not ok - ") + what + ("" if ok or not detail else f" ({detail})"))
    failed = failed or not ok


UNIT_MS = {"ms": 1, "s": 1000, "min": 60000, "h": 3600000}
UNIT_KB = {"kB": 1, "MB": 1024, "GB": 1024 ** 2, "TB": 1024 ** 3}


def number(text, unit):
    """A documented number ('5s', '32MB', '50 000 000', '1e9', '-1') in the setting's own unit, or None."""
    t = text.replace("\u2009", "").replace("\u202f", "").replace(" ", "")
    m = re.fullmatch(r"(-?[0-9.]+(?:e[-+]?[0-9]+)?)([A-Za-z]*)", t)
    if not m:
        return None
    v, suffix = float(m.group(1)), m.group(2)
    if not suffix:
        return v
    if unit == "ms" and suffix in UNIT_MS:
        return v * UNIT_MS[suffix]
    if unit == "kB" and suffix in UNIT_KB:
        return v * UNIT_KB[suffix]
    return None


def same_number(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def check_settings(root, settings_tsv):
    settings = {}
    for line in Path(settings_tsv).read_text().splitlines():
        name, vartype, unit, boot, lo, hi, context, enumvals = line.split("|")
        settings[name] = dict(vartype=vartype, unit=unit, boot=boot, lo=lo, hi=hi, context=context,
                              enumvals=enumvals.strip("{}").split(",") if enumvals else [])
    check(len(settings) > 20, f"the server lists the extension's settings ({len(settings)})")
    documented = {}
    for line in (root / "doc/configuration.md").read_text().splitlines():
        if not line.startswith("| `ogc_throttle."):
            continue
        row = cells(line)
        names = []
        for token in re.findall(r"`([^`]+)`", row[0]):
            if token.startswith("…"):
                prev = names[-1]
                for k in range(len(prev), 0, -1):  # the longest prefix of the name before that makes a setting
                    if prev[:k] + token[1:] in settings:
                        token = prev[:k] + token[1:]
                        break
            names.append(token)
        defaults = [d.strip() for d in row[2].split(",")]
        if len(defaults) != len(names):
            defaults = [row[2]] * len(names)
        for name, default in zip(names, defaults):
            documented[name] = dict(type=row[1], default=default, context=row[3])
    for name in sorted(settings):
        check(name in documented, f"{name} has a row in doc/configuration.md")
    for name in sorted(documented):
        check(name in settings, f"doc/configuration.md's {name} is a setting the server has")
    for path in sorted((root / "doc").glob("*.md")) + [root / "README.md"]:
        named = set(re.findall(r"\bogc_throttle\.([a-z_]+)", path.read_text())) - {"so", "stat"}  # files
        stale = sorted(n for n in named if "ogc_throttle." + n not in settings)
        check(not stale, f"{path.relative_to(root)} names only settings the server has", ", ".join(stale))
    for name in sorted(set(settings) & set(documented)):
        s, d = settings[name], documented[name]
        if s["vartype"] in ("bool", "enum"):
            ok = d["default"] == s["boot"]
        elif s["vartype"] == "string":
            ok = d["default"].startswith("empty") if s["boot"] == "" else d["default"].strip("`'") == s["boot"]
        else:
            ok = same_number(number(d["default"], s["unit"]), float(s["boot"]))
        check(ok, f"{name}: the documented default is the server's", f"doc '{d['default']}', server '{s['boot']}'")
        want = s["context"]  # (postmaster, sighup, superuser or user)
        ctx = d["context"]
        got = "sighup" if ctx.startswith("`postgresql.conf`") or ctx.startswith("sighup") else ctx.split()[0].strip(",")
        check(got == want, f"{name}: the documented context is the server's", f"doc '{ctx}', server '{want}'")
        if s["vartype"] == "enum":
            values = re.findall(r"`([^`]+)`", d["type"])
            check(sorted(values) == sorted(s["enumvals"]), f"{name}: the documented values are the server's",
                  f"doc {values}, server {s['enumvals']}")
        m = re.search(r"\(([^()]*?) – ([^()]*?)\)", d["type"])
        if m and s["vartype"] in ("integer", "real"):
            lo, hi = number(m.group(1), s["unit"]), number(m.group(2), s["unit"])
            check(same_number(lo, float(s["lo"])) and same_number(hi, float(s["hi"])),
                  f"{name}: the documented range is the server's", f"doc {m.group(0)}, server ({s['lo']} – {s['hi']})")


def check_objects(root, objects_tsv):
    objects = {}  # name -> kind
    backing = set()  # functions an extension view calls (documented through the view)
    for line in Path(objects_tsv).read_text().splitlines():
        kind, name, in_view = line.split("|")
        objects[name] = kind
        if in_view == "t":
            backing.add(name)
    check(len(objects) > 20, f"the extension's objects are listed ({len(objects)})")
    api = (root / "doc/sql-api.md").read_text()
    for name in sorted(objects):
        if name in backing:
            continue  # read through its view, which is documented
        check(re.search(r"`" + re.escape(name) + r"[(`]", api) is not None,
              f"{objects[name]} {name} is in doc/sql-api.md")
    docs = sorted((root / "doc").glob("*.md")) + [root / "README.md"]
    for path in docs:
        named = set(re.findall(r"\b(throttle_[a-z_]+)\(", path.read_text()))
        stale = sorted(n for n in named if n not in objects)
        check(not stale, f"{path.relative_to(root)} calls only functions the extension has", ", ".join(stale))


def check_errcodes(root, errcodes_h):
    codes = {}
    for m in re.finditer(r"#define (ERRCODE_[A-Z_]+)\s+MAKE_SQLSTATE\(([^)]*)\)", Path(errcodes_h).read_text()):
        codes[m.group(1)] = "".join(re.findall(r"'(.)'", m.group(2)))
    own = {}
    for m in re.finditer(r"inline const int (k[A-Za-z]+) = MAKE_SQLSTATE\(([^)]*)\)",
                         (root / "src/ext/sqlstates.hpp").read_text()):
        own[m.group(1)] = "".join(re.findall(r"'(.)'", m.group(2)))
    raised = {}
    for path in sorted((root / "src/ext").glob("*.cpp")):
        for m in re.finditer(r"(?:errcode|make_error)\(\s*(ERRCODE_[A-Z_]+|k[A-Za-z]+)", path.read_text()):
            code = codes.get(m.group(1)) or own.get(m.group(1))
            check(code is not None, f"{m.group(1)} ({path.name}) is a known SQLSTATE")
            if code:
                raised.setdefault(code, set()).add(path.name)
    check(len(raised) >= 5, f"the SQLSTATEs the extension raises are found ({len(raised)})")
    errors = (root / "doc/errors.md").read_text()
    for code in sorted(raised):
        check(f"`{code}`" in errors, f"SQLSTATE {code} ({', '.join(sorted(raised[code]))}) is in doc/errors.md")


root = Path(sys.argv[1])
check_settings(root, sys.argv[2])
check_objects(root, sys.argv[3])
check_errcodes(root, sys.argv[4])
sys.exit(1 if failed else 0)
