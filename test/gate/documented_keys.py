#!/usr/bin/env python3
"""Every key the gate's configuration accepts is named in doc/: the gate refuses keys it does not know,
so each key it knows is read from where it checks them (check_keys lists, `k != "…"` chains) and looked
for in the documents as `key:` or `key`. One TAP line per key.

usage: documented_keys.py ROOT
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
keys = {}
for path in sorted((root / "src/gate").glob("*config*.cpp")):
    text = path.read_text()
    lists = [m.group(1) for m in re.finditer(r"check_keys\([^{;]*\{([^}]*)\}", text, re.S)]
    lists += [m.group(0) for m in re.finditer(r'(?:k != "[a-z_0-9]+"\s*(?:&&\s*)?)+', text)]
    for chunk in lists:
        for k in re.findall(r'"([a-z_0-9]+)"', chunk):
            keys.setdefault(k, path.name)
docs = "".join(p.read_text() for p in sorted((root / "doc").glob("*.md")))
failed = False
print(("ok" if len(keys) >= 60 else "not ok") + f" - the gate's configuration keys are found in its source ({len(keys)})")
failed = len(keys) < 60
for k in sorted(keys):
    ok = re.search(r"(^|[\s`.{])" + re.escape(k) + r"(:|`)", docs, re.M) is not None
    print(("ok" if ok else "not ok") + f" - configuration key {k} ({keys[k]}) is named in doc/")
    failed = failed or not ok
sys.exit(1 if failed else 0)
