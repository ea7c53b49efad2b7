-- The pricing hook's view of real-shaped statements, through throttle_explain
-- (plans, never runs or charges). priced() keeps the charged calls and the
-- total so that the output does not depend on the plan shape the planner picks.
CREATE TABLE hook_pts AS
  SELECT i AS id, 'p' || i AS name,
         ST_SetSRID(ST_MakePoint(5 + (i % 100) * 0.01, 50 + (i / 100) * 0.01), 4326)::geometry(Point, 4326) AS geom
    FROM generate_series(0, 9999) i;
CREATE INDEX ON hook_pts USING gist (geom);
CREATE TABLE hook_pts_3857 AS SELECT id, ST_Transform(geom, 3857)::geometry(Point, 3857) AS geom FROM hook_pts;
CREATE TABLE hook_pts_unanalysed WITH (autovacuum_enabled = false) AS SELECT * FROM hook_pts;
ANALYZE hook_pts;
ANALYZE hook_pts_3857;

CREATE FUNCTION priced(q text) RETURNS TABLE (call text, cost numeric) LANGUAGE sql AS $$
  SELECT regexp_replace(call, ': [0-9.e+-]+$', ''), round(cost::numeric, 4)
    FROM throttle_explain(q) WHERE cost > 0 OR call LIKE 'total%' OR call LIKE 'rows capped%'
$$;

-- Rows come from PostGIS's statistics of the searched column where it has
-- them (~N rows), else from the searched area × ogc_throttle.density.
SELECT * FROM priced($$SELECT id FROM hook_pts_unanalysed WHERE geom && ST_MakeEnvelope(5, 50, 5.2, 50.2, 4326)$$);
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE geom && ST_MakeEnvelope(5, 50, 5.2, 50.2, 4326)$$);
SELECT count(*) AS actual_rows FROM hook_pts WHERE geom && ST_MakeEnvelope(5, 50, 5.2, 50.2, 4326);

-- ST_DWithin: geometry in degrees (converted at 111 319 m/°), geography in
-- metres, a projected SRID in its own unit, the text variant.
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.01)$$);
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_DWithin(geom::geography, ST_MakePoint(5.5, 50.5)::geography, 1000)$$);
SELECT * FROM priced($$SELECT id FROM hook_pts_3857 WHERE ST_DWithin(geom, ST_Transform('SRID=4326;POINT(5.5 50.5)'::geometry, 3857), 1000)$$);
-- (text, text) is inlined as geometry; all-constant calls are folded away by the planner: nothing left to price.
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_DWithin(ST_AsText(geom), 'POINT(5.5 50.5)', 0.01)$$);
SELECT * FROM priced($$SELECT ST_DWithin('POINT(0 0)'::text, 'POINT(1 1)'::text, 2)$$);
-- GeoServer: ST_DWithin(geom, ST_GeomFromText('POINT(…)', srid), d).
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_DWithin(geom, ST_GeomFromText('POINT(5.5 50.5)', 4326), 0.05)$$);
-- A radius from a column is only known during execution: priced at cost_max.
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, id * 0.001)$$);

-- Boxes: pg_featureserv (literal envelope, LIMIT/OFFSET), GeoServer (&& a WKT
-- polygon), exponent numbers, ST_Intersects against a transformed constant.
SELECT * FROM priced($$SELECT id, name FROM hook_pts WHERE geom && ST_MakeEnvelope(5.1, 50.1, 5.3, 50.3, 4326) ORDER BY id LIMIT 10 OFFSET 20$$);
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE geom && ST_GeomFromText('POLYGON((5 50,5.2 50,5.2 50.2,5 50.2,5 50))', 4326)$$);
SELECT * FROM priced($$SELECT id FROM hook_pts_3857 WHERE geom && ST_MakeEnvelope(5.566e+05, 6.446e+06, 5.70e+05, 6.46e+06, 3857)$$);
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE ST_Intersects(geom, ST_Transform(ST_MakeEnvelope(5.566e+05, 6.446e+06, 5.70e+05, 6.46e+06, 3857), 4326))$$);
-- The same box as filter and in the select list is charged once.
SELECT * FROM priced($$SELECT ST_MakeEnvelope(5, 50, 5.2, 50.2, 4326), id FROM hook_pts WHERE geom && ST_MakeEnvelope(5, 50, 5.2, 50.2, 4326)$$);
-- An envelope from a subquery is unknown until execution: cost_max.
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE geom && (SELECT ST_MakeEnvelope(5, 50, 5 + random(), 51, 4326))$$);
-- Column against column is a join, not a box filter; its radius is priced once.
SELECT * FROM priced($$SELECT count(*) FROM hook_pts a JOIN hook_pts b ON ST_DWithin(a.geom, b.geom, 0.001) WHERE a.id < 5$$);
-- Empty geometry searches nothing.
SELECT * FROM priced($$SELECT id FROM hook_pts WHERE geom && 'SRID=4326;POLYGON EMPTY'::geometry$$);

-- Tiles: pg_tileserv's table layer (CTE bounds, ST_AsMVTGeom, LIMIT 50000),
-- a martin-style envelope with literal zoom, ST_AsMVT with unknown bounds.
SELECT * FROM priced($$
  WITH bounds AS (SELECT ST_MakeEnvelope(5.566e+05, 6.446e+06, 5.70e+05, 6.46e+06, 3857) AS geom_clip,
                         ST_MakeEnvelope(5.5e+05, 6.44e+06, 5.76e+05, 6.466e+06, 3857) AS geom_query),
  mvtgeom AS (SELECT ST_AsMVTGeom(ST_Transform(t.geom, 3857), bounds.geom_clip::box2d, 4096, 256) AS geom, t.id
                FROM hook_pts t, bounds
               WHERE ST_Intersects(t.geom, ST_Transform(bounds.geom_query, 4326)) LIMIT 50000)
  SELECT ST_AsMVT(mvtgeom.*) FROM mvtgeom$$);
SELECT * FROM priced($$SELECT ST_AsMVT(q, 'pts') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(10, 526, 347)) AS geom FROM hook_pts WHERE geom && ST_Transform(ST_TileEnvelope(10, 526, 347), 4326)) q$$);
SELECT * FROM priced($$SELECT ST_AsMVT(q, 'pts') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(2, 2, 1)) AS geom FROM hook_pts WHERE geom && ST_Transform(ST_TileEnvelope(2, 2, 1), 4326)) q$$);
SELECT * FROM priced($$SELECT ST_AsMVT(q, 'pts') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), (SELECT ST_TileEnvelope(2, 2, 1))::box2d) AS geom FROM hook_pts) q$$);
-- Lower zoom never costs less.
SELECT bool_and(a.cost >= b.cost) AS zoom_monotonic FROM generate_series(0, 19) z,
  LATERAL (SELECT cost FROM throttle_explain(format('SELECT ST_AsMVT(q) FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(%s, 0, 0)) FROM hook_pts) q', z)) WHERE call LIKE 'total%') a,
  LATERAL (SELECT cost FROM throttle_explain(format('SELECT ST_AsMVT(q) FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(%s, 0, 0)) FROM hook_pts) q', z + 1)) WHERE call LIKE 'total%') b;

-- Statements without PostGIS calls are not priced.
SELECT * FROM priced($$SELECT id, name FROM hook_pts WHERE id < 10 ORDER BY id LIMIT 5$$);
SELECT * FROM priced($$SELECT 1$$);
-- Several statements, utility statements skipped.
SELECT statement, call FROM throttle_explain($$SET work_mem = '4MB'; SELECT 1; SELECT ST_DWithin(geom, geom, 1) FROM hook_pts LIMIT 1$$) WHERE call LIKE 'total%';
SELECT show_error($$SELECT * FROM throttle_explain(NULL)$$);
SELECT show_error($$SELECT * FROM throttle_explain('SELEC 1')$$);
