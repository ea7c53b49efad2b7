"""PostgreSQL's duration lines of statements tagged /*<prefix>:<tag>*/ (charges.py, toptime.py)."""
import re


def tagged(log_path, prefix):
    """(tag, ms) for each duration line of a statement (or extended-protocol execute) tagged with prefix."""
    pat = re.compile(r"duration: ([0-9.]+) ms  (?:statement|execute [^:]*): /\*%s:([^*]+)\*/" % re.escape(prefix))
    with open(log_path, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                yield m.group(2), float(m.group(1))
