#!/usr/bin/env python3
# The statements of identity.sh: usage identity_gen.py SEED N. Each shape N times
# with random arguments through throttle_explain, then as a PREPAREd statement
# EXECUTEd N/2 times under generic and N/2 under custom plans (refused in reject
# mode at a tiny capacity: the refusal's DETAIL carries the explanation).
import random, math, sys
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 17)
R = random.random
def merc_xy():
    return 556597 + R() * 1113195, 5621521 + R() * 1740345
def lonlat():
    # near the fidelity cities' band, sometimes far out
    if R() < 0.8: return -10 + 50 * R(), 35 + 25 * R()
    return -180 + 360 * R(), -60 + 130 * R()
def tile(z, lon=None, lat=None):
    if lon is None:
        x, y = merc_xy()
    else:
        x = lon * 20037508.34 / 180
        y = math.log(math.tan((90 + lat) * math.pi / 360)) / (math.pi / 180) * 20037508.34 / 180
    n = 1 << z
    tx = int((x + 20037508.34) * n / 40075016.68)
    ty = int((20037508.34 - y) * n / 40075016.68)
    return z, tx, ty
def env(lon, lat, w):
    return f"ST_MakeEnvelope({lon:.5f}, {lat:.5f}, {lon + w:.5f}, {lat + w * 0.7:.5f}, 4326)"

# (name, param types, body with $n, generator of literal args)
T = []
def t(name, types, body, args):
    T.append((name, types, body, args))

t("dwithin_geom", "float8,float8,float8",
  "SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2), 3857), $3)",
  lambda: [*merc_xy(), 100 + R() * 20000])
t("dwithin_geog", "float8,float8,float8",
  "SELECT id, kind FROM fpts WHERE ST_DWithin(geog, ST_SetSRID(ST_MakePoint($1, $2), 4326)::geography, $3)",
  lambda: [*lonlat(), 50 + R() * 30000])
t("dwithin_deg_page", "float8,float8,float8,int,int",
  "SELECT id FROM fpts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326), $3) ORDER BY id LIMIT $4 OFFSET $5",
  lambda: [*lonlat(), R() * 0.5, random.choice([10, 100, 1000]), random.choice([0, 0, 50, 500])])
t("tile_pts", "int,int,int",
  "SELECT length(ST_AsMVT(t, 'pts')) FROM (SELECT id, kind, ST_AsMVTGeom(geom, ST_TileEnvelope($1, $2, $3), 4096, 64, true) AS geom FROM pts WHERE geom && ST_TileEnvelope($1, $2, $3, margin => 0.015625)) t",
  lambda: list(tile(random.randint(8, 15))))
t("tile_fpts", "int,int,int",
  "SELECT ST_AsMVT(t.*, 'l') FROM (SELECT id, ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($1, $2, $3)) AS geom FROM fpts WHERE geom && ST_Transform(ST_TileEnvelope($1, $2, $3), 4326)) t",
  lambda: list(tile(random.randint(8, 15), *lonlat())))
t("tile_row", "int,int,int",
  "SELECT ST_AsMVT(q, 'l', 4096, 'g') FROM (SELECT kind, ST_AsMVTGeom(geom, ST_TileEnvelope($1, $2, $3)::box2d) AS g FROM pts WHERE geom && ST_TileEnvelope($1, $2, $3)) q",
  lambda: list(tile(random.randint(8, 15))))
t("box", "float8,float8,float8",
  "SELECT id, geom FROM fpts WHERE geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3 * 0.7, 4326)",
  lambda: [*lonlat(), 10 ** (-3 + 3.5 * R())])
t("box_limit", "float8,float8,float8,int",
  "SELECT ST_AsGeoJSON(geom) FROM fpts WHERE geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326) LIMIT $4",
  lambda: [*lonlat(), 10 ** (-2 + 2.5 * R()), random.choice([1, 10, 100, 5000])])
t("intersects_poly", "float8,float8,float8",
  "SELECT id FROM fpoly WHERE ST_Intersects(geom, ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326))",
  lambda: [*lonlat(), 10 ** (-2 + 2.5 * R())])
t("contains_point", "float8,float8",
  "SELECT id, city FROM fpoly WHERE ST_Contains(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326))",
  lambda: list(lonlat()))
t("q_join", "float8,float8,float8",
  "SELECT p.id, count(*) FROM fpoly p JOIN fpts t ON ST_Intersects(p.geom, t.geom) WHERE p.geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326) GROUP BY p.id",
  lambda: [*lonlat(), 10 ** (-2 + 2 * R())])
t("join_dwithin", "int,float8",
  "SELECT c.id, t.id FROM fcity c JOIN fpts t ON ST_DWithin(t.geom, c.center, $2) WHERE c.id < $1",
  lambda: [random.randint(1, 60), R() * 0.05])
t("lateral_knn", "int,int",
  "SELECT c.id, n.id FROM fcity c CROSS JOIN LATERAL (SELECT id FROM fpts ORDER BY geom <-> c.center LIMIT $2) n WHERE c.id <= $1",
  lambda: [random.randint(1, 60), random.randint(1, 50)])
t("knn", "float8,float8,int",
  "SELECT id, ST_Distance(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326)) FROM fpts ORDER BY geom <-> ST_SetSRID(ST_MakePoint($1, $2), 4326) LIMIT $3",
  lambda: [*lonlat(), random.randint(1, 500)])
t("subquery", "float8,float8,float8,text",
  "SELECT count(*) FROM fpts WHERE kind IN (SELECT kind FROM fkinds WHERE label LIKE $4) AND geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326)",
  lambda: [*lonlat(), 10 ** (-2 + 2 * R()), random.choice(["kind 1", "kind %", "kind 7"])])
t("correlated", "int,float8",
  "SELECT c.id, (SELECT count(*) FROM fpts t WHERE ST_DWithin(t.geom, c.center, $2)) FROM fcity c WHERE c.id <= $1",
  lambda: [random.randint(1, 60), R() * 0.1])
t("cte_buffer", "float8,float8,float8",
  "WITH b AS MATERIALIZED (SELECT ST_Buffer(ST_SetSRID(ST_MakePoint($1, $2), 4326), $3) AS g) SELECT count(*) FROM fpts, b WHERE ST_Intersects(fpts.geom, b.g)",
  lambda: [*lonlat(), R() * 0.3])
t("cte_inline", "float8,float8,float8",
  "WITH near AS (SELECT id, geom FROM fpts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326), $3)) SELECT p.id, count(*) FROM near n JOIN fpoly p ON ST_Within(n.geom, p.geom) GROUP BY p.id",
  lambda: [*lonlat(), R() * 0.2])
t("q_union", "float8,float8,float8",
  "SELECT id FROM fpts WHERE geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326) UNION ALL SELECT id FROM fpoly WHERE ST_Intersects(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326))",
  lambda: [*lonlat(), 10 ** (-2 + 2 * R())])
t("area_buffer", "float8,float8,float8",
  "SELECT id, ST_Area(ST_Buffer(geom, 0.01)) FROM fpoly WHERE geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326) AND ST_Area(ST_Buffer(geom, 0.001)) > 0",
  lambda: [*lonlat(), 10 ** (-1 + 1.5 * R())])
t("geog_box", "float8,float8,float8",
  "SELECT count(*) FROM fpts WHERE geog && ST_SetSRID(ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3), 4326)::geography",
  lambda: [*lonlat(), 10 ** (-2 + 2 * R())])
t("text_dwithin", "float8,float8,float8",
  "SELECT id FROM fpts WHERE ST_DWithin(geom, ('SRID=4326;POINT(' || $1 || ' ' || $2 || ')')::geometry, $3) LIMIT 50",
  lambda: [*lonlat(), R() * 0.3])
t("nogrid", "float8,float8,float8",
  "SELECT count(*) FROM pts_nogrid WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2), 3857), $3)",
  lambda: [*merc_xy(), 100 + R() * 20000])
t("nogrid_box", "float8,float8,float8",
  "SELECT id FROM pts_nogrid WHERE geom && ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 3857)",
  lambda: [*merc_xy(), 10 ** (2 + 3 * R())])
# More than 16 plan nodes: the visit walks the lists of the nodes past the kept ones itself.
t("many_nodes", "float8,float8,float8",
  " UNION ALL ".join(f"(SELECT count(*) FROM fpts t JOIN fkinds k USING (kind) WHERE ST_DWithin(t.geom, ST_SetSRID(ST_MakePoint($1 + {i}, $2), 4326), $3) AND k.label <> 'x' AND ST_Area(ST_Buffer(t.geom, 0.001)) > 0)" for i in range(8)),
  lambda: [*lonlat(), R() * 0.2])
t("seq_filter", "float8,float8,float8",
  "SELECT count(*) FROM fkinds k JOIN fpts t USING (kind) WHERE geometry_overlaps(t.geom, ST_MakeEnvelope($1, $2, $1 + $3, $2 + $3, 4326))",
  lambda: [*lonlat(), 10 ** (-2 + 2 * R())])

def lit(v):
    if isinstance(v, str): return "'" + v.replace("'", "''") + "'"
    if isinstance(v, int): return str(v)
    return repr(float(v))
def bind(body, args):
    s = body
    for i in range(len(args), 0, -1):
        s = s.replace(f"${i}", lit(args[i - 1]) + ("::float8" if isinstance(args[i - 1], float) else ""))
    return s

N = int(sys.argv[2]) if len(sys.argv) > 2 else 12
explain, execs = [], []
for name, types, body, args in T:
    for i in range(N):
        a = args()
        explain.append(f"\\echo == {name} {i}\nSELECT call, cost FROM throttle_explain($q${bind(body, a)}$q$);")
    execs.append(f"PREPARE {name}({types}) AS {body};")
    for i in range(N // 2):
        a = args()
        execs.append(f"\\echo == {name} exec {i}\nEXECUTE {name}({', '.join(lit(x) for x in a)});")
print("\\set ON_ERROR_STOP 0\n\\pset format unaligned\nSET ogc_throttle.mode = off;")
print("\n".join(explain))
# Parallel plans, in a few shapes
print("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;")
for name, types, body, args in T[:6]:
    print(f"\\echo == parallel {name}\nSELECT call, cost FROM throttle_explain($q${bind(body, args())}$q$);")
print("RESET parallel_setup_cost; RESET parallel_tuple_cost; RESET min_parallel_table_scan_size;")
print("SET enable_indexscan = off; SET enable_bitmapscan = off;")
for name, types, body, args in T[:10]:
    print(f"\\echo == seqscan {name}\nSELECT call, cost FROM throttle_explain($q${bind(body, args())}$q$);")
print("RESET enable_indexscan; RESET enable_bitmapscan;")
print("SET ogc_throttle.capacity = 0.001; SET ogc_throttle.rate = 1e9; SET ogc_throttle.mode = reject; SET statement_timeout = '20s';")
for mode in ("force_generic_plan", "force_custom_plan"):
    print(f"SET plan_cache_mode = {mode};")
    print("\n".join(e.replace("== ", f"== {mode} ") for e in execs))
    print("DEALLOCATE ALL;")
