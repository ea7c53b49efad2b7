#!/usr/bin/env python3
"""Writes the fidelity workload: one line per query, "id<TAB>class<TAB>sql".

usage: workload.py CITIES_TSV NQ [SEED] > queries.tsv
CITIES_TSV: id, lon, lat, sigma, n per line (from fcity). NQ: queries per class
(the disguised class gets 1.5x). Deterministic (seeded). The shapes follow what
martin, pg_tileserv, pg_featureserv and GeoServer send (see /work/shared/OGC-NOTES.md).
"""
import math
import random
import sys

rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 7)
cities = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5:
        cities.append((int(f[0]), float(f[1]), float(f[2]), float(f[3]), int(f[4])))
NQ = int(sys.argv[2]) if len(sys.argv) > 2 else 20
big = sorted(cities, key=lambda c: -c[4])


def place(dense_share=0.6):
    """A point in a city (dense, weighted to the big ones) or anywhere in the band (sparse)."""
    if rnd.random() < dense_share:
        c = big[min(int(rnd.expovariate(1 / 6)), len(big) - 1)]
        s = c[3] * rnd.random()
        return c[1] + rnd.gauss(0, s), c[2] + rnd.gauss(0, s)
    return rnd.uniform(-10, 40), rnd.uniform(35, 60)


def logu(lo, hi):
    return math.exp(rnd.uniform(math.log(lo), math.log(hi)))


def tile_of(lon, lat, z):
    n = 2 ** z
    x = int((lon + 180) / 360 * n)
    lr = math.radians(lat)
    y = int((1 - math.log(math.tan(lr) + 1 / math.cos(lr)) / math.pi) / 2 * n)
    return min(max(x, 0), n - 1), min(max(y, 0), n - 1)


def merc_bounds(z, x, y):
    size = 2 * 20037508.342789244 / 2 ** z
    xmin = -20037508.342789244 + x * size
    ymax = 20037508.342789244 - y * size
    return xmin, ymax - size, xmin + size, ymax


def pt(lon, lat):
    return "ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326)" % (lon, lat)


def env(lon, lat, w, h):
    return "ST_MakeEnvelope(%.6f, %.6f, %.6f, %.6f, 4326)" % (lon - w / 2, lat - h / 2, lon + w / 2, lat + h / 2)


out = []


def q(cls, sql):
    out.append((cls, " ".join(sql.split())))


for i in range(NQ):
    lon, lat = place(0.7)
    r = logu(10, 300000)
    form = i % 3
    if form == 0:
        q("geog_radius", "SELECT id, kind FROM fpts WHERE ST_DWithin(geog, ST_MakePoint(%.6f, %.6f)::geography, %.1f)" % (lon, lat, r))
    elif form == 1:
        q("geog_radius", "SELECT count(*) FROM fpts WHERE ST_DWithin(geog, 'SRID=4326;POINT(%.6f %.6f)'::geography, %.1f)" % (lon, lat, r))
    else:
        q("geog_radius", "SELECT id, ST_AsGeoJSON(geom) FROM fpts WHERE ST_DWithin(geog, ST_MakePoint(%.6f, %.6f)::geography, %.1f, false)" % (lon, lat, r))

for i in range(NQ):
    lon, lat = place(0.7)
    r = logu(0.0001, 3)
    if i % 2 == 0:
        q("geom_radius", "SELECT id, kind FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r))
    else:  # pg_featureserv CQL DWITHIN
        q("geom_radius", "SELECT id, ST_AsGeoJSON(geom) FROM fpts WHERE ST_DWithin(geom, 'SRID=4326;POINT(%.6f %.6f)'::geometry, %.6f) LIMIT 10000" % (lon, lat, r))

for i in range(NQ):
    z = 2 + (i * 7) % 15  # zooms 2..16
    lon, lat = place(0.6 if z >= 6 else 0.3)
    x, y = tile_of(lon, lat, z)
    if i % 2 == 0:  # martin
        q("tile", """SELECT ST_AsMVT(tile, 'fpts', 4096, 'geom') FROM (
            SELECT id, kind, ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(%d, %d, %d), 4096, 64, true) AS geom
            FROM fpts WHERE geom && ST_Transform(ST_TileEnvelope(%d, %d, %d, margin => (64.0 / 4096)), 4326)) AS tile"""
          % (z, x, y, z, x, y))
    else:  # pg_tileserv table layer
        b = merc_bounds(z, x, y)
        m = (b[2] - b[0]) * 64 / 4096
        q("tile", """SELECT ST_AsMVT(mvtgeom, 'public.fpts', 4096, 'geom') FROM (
            SELECT ST_AsMVTGeom(ST_Transform(t.geom, 3857), bounds.geom_clip, 4096, 256) AS geom, t.id, t.kind
            FROM fpts t, (SELECT ST_MakeEnvelope(%r, %r, %r, %r, 3857) AS geom_clip,
                                 ST_MakeEnvelope(%r, %r, %r, %r, 3857) AS geom_query) bounds
            WHERE ST_Intersects(t.geom, ST_Transform(bounds.geom_query, 4326)) LIMIT 50000) mvtgeom"""
          % (b[0], b[1], b[2], b[3], b[0] - m, b[1] - m, b[2] + m, b[3] + m))

for i in range(NQ):
    lon, lat = place(0.6)
    w = logu(0.002, 20)
    h = w * rnd.uniform(0.5, 1.0)
    n = rnd.choice([10, 100, 1000, 5000])
    off = rnd.choice([0, 0, n, 10 * n])
    form = i % 3
    if form == 0:  # pg_featureserv
        q("bbox_page", "SELECT id, kind, ST_AsGeoJSON(geom) FROM fpts WHERE ST_Intersects(geom, %s) LIMIT %d OFFSET %d" % (env(lon, lat, w, h), n, off))
    elif form == 1:  # GeoServer
        x0, y0 = lon - w / 2, lat - h / 2
        x1, y1 = lon + w / 2, lat + h / 2
        q("bbox_page", "SELECT id, kind, geom FROM fpts WHERE geom && ST_GeomFromText('POLYGON((%.6f %.6f, %.6f %.6f, %.6f %.6f, %.6f %.6f, %.6f %.6f))', 4326) LIMIT %d OFFSET %d"
          % (x0, y0, x1, y0, x1, y1, x0, y1, x0, y0, n, off))
    else:  # pg_featureserv with sortby
        q("bbox_page", "SELECT id, kind, ST_AsGeoJSON(geom) FROM fpts WHERE ST_Intersects(geom, %s) ORDER BY id LIMIT %d OFFSET %d" % (env(lon, lat, w, h), n, off))

for i in range(NQ):
    c = big[min(int(rnd.expovariate(1 / 8)), len(big) - 1)]
    w = c[3] * logu(0.5, 12)
    if i % 2 == 0:
        q("join", "SELECT p.id, count(*) FROM fpoly p JOIN fpts t ON ST_Contains(p.geom, t.geom) WHERE p.geom && %s GROUP BY p.id" % env(c[1], c[2], w, w))
    else:
        q("join", "SELECT t.id, p.id FROM fpts t JOIN fpoly p ON ST_Intersects(t.geom, p.geom) WHERE p.city = %d AND t.geom && %s" % (c[0], env(c[1], c[2], w, w)))

disguised = []
for i in range(int(NQ * 1.5)):
    lon, lat = place(0.7)
    w = logu(0.005, 8)
    k = i % 9
    if k == 0:
        q("disguised", "SELECT id FROM fpts WHERE ST_Contains(%s, geom)" % env(lon, lat, w, w))
    elif k == 1:
        q("disguised", "SELECT id FROM fpts WHERE ST_Within(geom, %s)" % env(lon, lat, w, w))
    elif k == 2:
        q("disguised", "SELECT id FROM fpts WHERE geometry_overlaps(geom, %s)" % env(lon, lat, w, w))
    elif k == 3:
        q("disguised", "SELECT id FROM fpts WHERE ST_Distance(geom, %s) < %.6f" % (pt(lon, lat), w / 4))
    elif k == 4:
        q("disguised", "SELECT id FROM fpts ORDER BY geom <-> %s LIMIT %d" % (pt(lon, lat), rnd.choice([1000, 10000, 50000, 100000])))
    elif k == 5:
        q("disguised", "SELECT c.id, n.cnt FROM fcity c, LATERAL (SELECT count(*) AS cnt FROM fpts t WHERE ST_DWithin(t.geom, c.center, %.6f)) n WHERE c.id <= %d" % (w / 8, rnd.choice([3, 10, 30])))
    elif k == 6:
        q("disguised", "SELECT count(*) FROM fpts WHERE geom && %s LIMIT 1" % env(lon, lat, w, w))
    elif k == 7:
        q("disguised", "SELECT id FROM fpts WHERE geom && %s AND kind IN (SELECT kind FROM fkinds ORDER BY kind LIMIT 5)" % env(lon, lat, w, w))
    else:
        q("disguised", "SELECT id FROM fpts WHERE geom && %s AND EXISTS (SELECT 1 FROM fcity LIMIT 1)" % env(lon, lat, w, w))

for i, (cls, sql) in enumerate(out, 1):
    print("%d\t%s\t%s" % (i, cls, sql))
