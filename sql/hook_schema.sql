-- PostGIS in another schema, created after the session started, dropped and
-- created again: the hook finds its functions by extension, not by name.
CREATE DATABASE regress_ot_gis;
\c regress_ot_gis
SET ogc_throttle.mode = 'reject';
SET ogc_throttle.rate = 0.01;
SELECT 1 AS before_postgis;
CREATE SCHEMA gis;
CREATE EXTENSION postgis SCHEMA gis;
CREATE EXTENSION ogc_throttle;
SELECT throttle_reset(current_user);
CREATE TABLE t AS SELECT gis.ST_SetSRID(gis.ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 100) i;
SELECT call FROM throttle_explain($$SELECT count(*) FROM t WHERE gis.ST_DWithin(geom, gis.ST_GeomFromText('POINT(0 0)', 4326), 0.01)$$)
 WHERE cost > 0 OR call LIKE 'total%';
SELECT count(*) FROM t WHERE gis.ST_DWithin(geom, gis.ST_GeomFromText('POINT(0 0)', 4326), 0.01);
SELECT round((capacity - tokens)::numeric, 2) AS charged FROM throttle_peek();
-- The estimators' geometry faces call PostGIS in its schema.
SELECT round(throttle_cost_radius(gis.ST_SetSRID(gis.ST_MakePoint(0, 0), 4326), 0.01)::numeric, 4) AS estimator;

-- Drop both and create PostGIS again elsewhere: new function OIDs, same session.
DROP EXTENSION ogc_throttle;
DROP EXTENSION postgis CASCADE;
SELECT 1 AS without_postgis;
CREATE SCHEMA gis2;
CREATE EXTENSION postgis SCHEMA gis2;
CREATE EXTENSION ogc_throttle;
SELECT throttle_reset(current_user);
CREATE TABLE t2 AS SELECT gis2.ST_SetSRID(gis2.ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 100) i;
SELECT count(*) FROM t2 WHERE gis2.ST_DWithin(geom, gis2.ST_GeomFromText('POINT(0 0)', 4326), 0.01);
SELECT round((capacity - tokens)::numeric, 2) AS charged_again FROM throttle_peek();
SELECT throttle_reset_all() >= 0 AS reset;
\c regression
DROP DATABASE regress_ot_gis;
