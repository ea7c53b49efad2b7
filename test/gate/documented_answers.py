#!/usr/bin/env python3
"""doc/gate.md's table of answers ("## Answers": client, format, Content-Type) against the refusals a
running gate sends: for each row, requests of each protocol it names, each refused by the gate itself (a
cap, a zoom level out of range, an operation it does not let through), and their answers read as a client
would: the root element, its namespace and version, the WMS code lists and locators, the Content-Type.
A row without requests here, or a client here without a row, is a failure too. TAP lines on stdout.
Usage: documented_answers.py ROOT GATE_URL"""
import json
import re
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

ROOT, GATE = sys.argv[1], sys.argv[2].rstrip("/")
failed = False


def check(name, ok):
    global failed
    print(("ok - " if ok else "not ok - ") + name)
    failed |= not ok


WMS_MAP = "SERVICE=WMS&REQUEST=GetMap&WIDTH=100000&HEIGHT=100000&LAYERS=x&STYLES=&BBOX=0,0,1,1&FORMAT=image/png"
# (client as named in the table's first column, request): every request is refused by the gate
REQUESTS = {
    "WMS 1.1.1": [f"/?{WMS_MAP}&VERSION=1.1.1&SRS=EPSG:4326",
                  "/?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetPrint"],
    "WMS 1.3.0": [f"/?{WMS_MAP}&VERSION=1.3.0&CRS=EPSG:4326",
                  "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetPrint"],
    "WFS 1.0": ["/?SERVICE=WFS&VERSION=1.0.0&REQUEST=GetFeature&TYPENAME=x&MAXFEATURES=999999"],
    "WCS 1.0": ["/?SERVICE=WCS&VERSION=1.0.0&REQUEST=GetCoverage&COVERAGE=x&CRS=EPSG:4326&BBOX=0,0,1,1"
                "&WIDTH=100000&HEIGHT=100000&FORMAT=GeoTIFF"],
    "WFS 1.1": ["/?SERVICE=WFS&VERSION=1.1.0&REQUEST=GetFeature&TYPENAME=x&MAXFEATURES=999999"],
    "WFS 2.0": ["/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=x&COUNT=999999"],
    "WCS 1.1": ["/?SERVICE=WCS&VERSION=1.1.1&REQUEST=GetCoverage&IDENTIFIER=d"
                "&BOUNDINGBOX=0,0,10,10,urn:ogc:def:crs:EPSG::4326&FORMAT=image/tiff&GridOffsets=0.00001,0.00001"],
    "WCS 2.0": ["/?SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=c&SUBSET=x(0,1)&SUBSET=y(0,1)"
                "&SCALESIZE=x(100000),y(100000)"],
    "WMTS": ["/?SERVICE=WMTS&VERSION=1.0.0&REQUEST=GetTile&LAYER=x&STYLE=default&TILEMATRIXSET=WebMercatorQuad"
             "&TILEMATRIX=30&TILEROW=0&TILECOL=0&FORMAT=image/png",
             "/wmts/pts/default/WebMercatorQuad/30/40/50.png"],
    "OGC API": ["/collections/x/items?limit=abc", "/collections/x/tiles/WebMercatorQuad/30/0/0"],
    "XYZ tiles": ["/tiles/osm/30/0/0.png"],
}
WMS_CODES = {  # WMS 1.1.1's exception codes, and 1.3.0's Table E.1 (InvalidCRS for InvalidSRS)
    "1.1.1": {"InvalidFormat", "InvalidSRS", "LayerNotDefined", "StyleNotDefined", "LayerNotQueryable",
              "InvalidPoint", "CurrentUpdateSequence", "InvalidUpdateSequence", "MissingDimensionValue",
              "InvalidDimensionValue", "OperationNotSupported"},
    "1.3.0": {"InvalidFormat", "InvalidCRS", "LayerNotDefined", "StyleNotDefined", "LayerNotQueryable",
              "InvalidPoint", "CurrentUpdateSequence", "InvalidUpdateSequence", "MissingDimensionValue",
              "InvalidDimensionValue", "OperationNotSupported"},
}
NAMESPACES = {"OWS 1.0": "http://www.opengis.net/ows", "OWS 1.1": "http://www.opengis.net/ows/1.1",
              "the ogc namespace": "http://www.opengis.net/ogc"}


def table():
    text = open(f"{ROOT}/doc/gate.md", encoding="utf-8").read()
    section = text[text.index("\n## Answers"):]
    rows = []
    for line in section.splitlines()[2:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) == 3 and cells[0] not in ("Client", "---") and not cells[0].startswith("-"):
            rows.append(cells)
        elif rows and not line.startswith("|"):
            break
    return rows


def clients(cell):
    """'WFS 2.0, WCS 1.1/2.0' -> ['WFS 2.0', 'WCS 1.1', 'WCS 2.0']; 'WMTS (KVP and REST: …)' -> ['WMTS']"""
    cell = re.sub(r"\s*\(.*\)", "", cell)
    out = []
    for part in cell.split(","):
        part = part.strip()
        m = re.match(r"(\S+) ([\d./]+)$", part)
        if m:
            out += [f"{m.group(1)} {v}" for v in m.group(2).split("/")]
        else:
            out.append(part)
    return [c for c in out if c != "unknown"]


def fetch(path):
    try:
        with urllib.request.urlopen(GATE + path, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def expect_xml(client, fmt, body):
    """What the format column says of this client's XML answer, checked; returns the failures."""
    bad = []
    try:
        doc = ET.fromstring(body)
    except ET.ParseError as e:
        return [f"not XML ({e})"]
    ns, local = re.match(r"(?:\{(.*)\})?(.*)", doc.tag).groups()
    root = re.search(r"`(?:ows:)?(\w+)", fmt).group(1)
    if local != root:
        bad.append(f"root {local}, the table says {root}")
    want_ns = None
    m = re.search(r"in `([^`]+)`", fmt)
    if m:
        want_ns = m.group(1)
    for phrase, uri in NAMESPACES.items():
        if phrase in fmt:
            want_ns = uri
    if "no namespace" in fmt:
        want_ns = ""
    if want_ns is None:
        bad.append("the table names no namespace this check reads")
    elif (ns or "") != want_ns:
        bad.append(f"namespace '{ns or ''}', the table says '{want_ns}'")
    service = client.split()[0]
    versions = dict((s, v) for v, s in re.findall(r"([\d.]+) for (\w+)", fmt))
    want_v = versions.get(service) or next(iter(re.findall(r'version[= ]"?([\d.]+)', fmt)), None)
    if want_v is not None and doc.get("version") != want_v:
        bad.append(f"version {doc.get('version')}, the table says {want_v}")
    items = list(doc)
    if not items:
        bad.append("no exception in the report")
    if local == "ServiceExceptionReport" and client.startswith("WMS"):
        codes = {e.get("code") for e in items if e.get("code") is not None}
        listed = WMS_CODES[client.split()[1]]
        if not codes <= listed:
            bad.append(f"code(s) {sorted(codes - listed)} outside WMS {client.split()[1]}'s list")
        locators = [e.get("locator") for e in items if e.get("locator") is not None]
        if "no `locator`" in fmt and locators:
            bad.append(f"a locator ({locators[0]}) where the table says none")
        if "`locator` kept" in fmt and not locators:
            bad.append("no locator where the table says it is kept")
    return bad


rows = table()
check(f"doc/gate.md's table of answers has rows ({len(rows)})", len(rows) >= 6)
named = set()
for cell, fmt, ctype in rows:
    want_type = ctype.strip("`")
    for client in clients(cell):
        named.add(client)
        paths = REQUESTS.get(client)
        if not paths:
            check(f"the table's client '{client}' has requests in this check", False)
            continue
        for path in paths:
            status, got_type, body = fetch(path)
            bad = []
            if status < 400 and status != 200:
                bad.append(f"status {status}")
            if got_type != want_type:
                bad.append(f"Content-Type '{got_type}', the table says '{want_type}'")
            if fmt.startswith("`"):
                bad += expect_xml(client, fmt, body)
            elif "JSON" in fmt:
                try:
                    j = json.loads(body)
                    if not {"type", "title", "status"} <= set(j):
                        bad.append("problem details without type, title and status")
                except ValueError:
                    bad.append("not JSON")
            elif "plain text" in fmt and body.lstrip()[:1] in (b"<", b"{"):
                bad.append("not plain text")
            elif "plain text" not in fmt:
                bad.append(f"a format this check cannot read: {fmt}")
            if not body.strip():
                bad.append("an empty body")
            check(f"{client} {path.lstrip('/?')[:72]}: answered as doc/gate.md says ({status} {got_type})"
                  + (f": {'; '.join(bad)}" if bad else ""), not bad)
for client in sorted(set(REQUESTS) - named):
    check(f"'{client}', refused here, has a row in doc/gate.md's table of answers", False)
sys.exit(1 if failed else 0)
