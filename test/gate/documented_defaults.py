#!/usr/bin/env python3
"""The defaults `ogc-gate --help` prints (stdin) against the default column of doc/gate.md's flag table:
every default that is a value (a number, an address, a URL; not prose such as "one per core") must be the
table's for that flag. A row naming two flags ("`--rate` / `--burst`") gives their defaults in the same
order ("100 / 1000"). TAP lines on stdout. Usage: ogc-gate --help | documented_defaults.py ROOT"""
import re
import sys

ROOT = sys.argv[1]
failed = False


def check(name, ok):
    global failed
    print(("ok - " if ok else "not ok - ") + name)
    failed |= not ok


helps = []  # [flag, its whole text, continuation lines joined]
for line in sys.stdin.read().splitlines():
    m = re.match(r"^  (?:-\w \[ )?(--[a-z-]+)", line)
    if m:
        helps.append([m.group(1), line])
    elif helps and line.startswith(" " * 10):
        helps[-1][1] += " " + line.strip()
defaults = {}
for flag, text in helps:
    m = (re.search(r"\(=([^)]+)\)", text) or re.search(r"\(default:? *([^),]+)", text)
         or re.search(r"(\S+)\s+\(default\b", text))
    if m and re.fullmatch(r"[\w.:/]+", m.group(1).strip()):
        defaults[flag] = m.group(1).strip()

table = {}
for line in open(f"{ROOT}/doc/gate.md", encoding="utf-8"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("| `--") or len(cells) < 3:
        continue
    flags = re.findall(r"`(--[a-z-]+)`", cells[0])
    values = [v.strip().strip("`") for v in cells[1].split(" / ")]
    for i, f in enumerate(flags):
        table[f] = values[i] if len(values) == len(flags) else cells[1].strip("`")

check(f"--help prints defaults that are values ({len(defaults)})", len(defaults) >= 8)
for flag, value in sorted(defaults.items()):
    got = table.get(flag)
    check(f"{flag}'s default {value} (--help) is doc/gate.md's ({got})", got == value)
sys.exit(1 if failed else 0)
