-- The pricing hook charging real statements: reject and log modes, bound
-- parameters, generic plans, function layers, cursors, identities, roles.
-- (Delay mode needs two sessions and a clock: test/pg/delay.t.sh.)
SET ogc_throttle.capacity = 100;
SET ogc_throttle.rate = 0.01;
SET ogc_throttle.cost_max = 100;
SELECT throttle_reset_all() >= 0 AS reset;
SELECT throttle_stats_reset();
-- How much a statement took from our bucket: tokens before minus after.
CREATE FUNCTION charged_by(q text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE before float8; after float8;
BEGIN
    SELECT tokens INTO before FROM throttle_peek(current_user);
    EXECUTE q;
    SELECT tokens INTO after FROM throttle_peek(current_user);
    RETURN round((before - after)::numeric, 2);
END $$;

-- off (the default): nothing is charged.
SHOW ogc_throttle.mode;
SELECT charged_by($$SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05)$$) AS off;

SET ogc_throttle.mode = 'reject';
SELECT charged_by($$SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05)$$) AS literal;
SELECT charged_by($$SELECT count(*) FROM hook_pts WHERE id < 10$$) AS no_postgis;
-- EXPLAIN without ANALYZE does not run the statement and is not charged.
SELECT charged_by($$EXPLAIN SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05)$$) AS explain_only;

-- Prepared statements: each execution pays for its own bound radius, before
-- and after the plan cache switches to a generic plan (6th execution) and
-- with force_generic_plan.
PREPARE near(float8) AS SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, $1);
SELECT charged_by('EXECUTE near(0.01)') AS e1, charged_by('EXECUTE near(0.01)') AS e2, charged_by('EXECUTE near(0.01)') AS e3,
       charged_by('EXECUTE near(0.01)') AS e4, charged_by('EXECUTE near(0.01)') AS e5, charged_by('EXECUTE near(0.05)') AS e6_bigger,
       charged_by('EXECUTE near(0.01)') AS e7;
SET plan_cache_mode = force_generic_plan;
SELECT throttle_reset(current_user);
PREPARE tile(int, int, int) AS
  SELECT ST_AsMVT(q, 'pts') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($1, $2, $3)) AS geom
                                    FROM hook_pts WHERE geom && ST_Transform(ST_TileEnvelope($1, $2, $3), 4326)) q;
SELECT charged_by('EXECUTE tile(14, 8418, 5555)') AS z14, charged_by('EXECUTE tile(12, 2104, 1388)') AS z12,
       charged_by('EXECUTE tile(10, 526, 347)') AS z10;
-- martin's shape: int8 parameters cast to integer.
PREPARE martin(int8, int8, int8) AS
  SELECT ST_AsMVT(t, 'pts') FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope($1::integer, $2::integer, $3::integer), 4096, 64, true) AS geom
                                    FROM hook_pts WHERE geom && ST_Transform(ST_TileEnvelope($1::integer, $2::integer, $3::integer, margin => (64.0 / 4096)), 4326)) t;
SELECT charged_by('EXECUTE martin(12, 2104, 1388)') AS martin_z12;
-- GeoServer's prepared mode: the filter geometry arrives as WKB in a bytea parameter.
PREPARE geoserver(bytea) AS SELECT count(*) FROM hook_pts WHERE geom && ST_GeomFromWKB($1, 4326);
SELECT charged_by(format('EXECUTE geoserver(%L)', ST_AsBinary(ST_MakeEnvelope(5, 50, 5.05, 50.05, 4326)))) AS wkb_small,
       charged_by(format('EXECUTE geoserver(%L)', ST_AsBinary(ST_MakeEnvelope(5, 50, 5.3, 50.3, 4326)))) AS wkb_larger;
RESET plan_cache_mode;

SELECT throttle_reset(current_user);
-- A PL/pgSQL function layer (pg_tileserv/martin "function source"): the SQL
-- inside is priced with the function's arguments.
CREATE FUNCTION pts_tile(z integer, x integer, y integer) RETURNS bytea LANGUAGE plpgsql STABLE AS $$
DECLARE mvt bytea;
BEGIN
    SELECT ST_AsMVT(q, 'pts') INTO mvt
      FROM (SELECT ST_AsMVTGeom(ST_Transform(geom, 3857), ST_TileEnvelope(z, x, y)) AS geom
              FROM hook_pts WHERE geom && ST_Transform(ST_TileEnvelope(z, x, y), 4326)) q;
    RETURN mvt;
END $$;
SELECT charged_by('SELECT pts_tile(12, 2104, 1388)') AS plpgsql_z12, charged_by('SELECT pts_tile(14, 8418, 5555)') AS plpgsql_z14;
-- A SQL function that is not inlined (it is STRICT and SETOF) is priced inside too.
CREATE FUNCTION pts_near(r float8) RETURNS SETOF integer LANGUAGE sql STRICT AS
  $$ SELECT id FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, r) $$;
SELECT charged_by('SELECT count(*) FROM pts_near(0.05)') AS sql_function;

SELECT throttle_reset(current_user);
-- QGIS reads through a cursor: charged once when it is declared, not per FETCH.
BEGIN;
SELECT tokens AS before_declare FROM throttle_peek(current_user) \gset
DECLARE c BINARY CURSOR FOR SELECT id, geom FROM hook_pts WHERE geom && st_makeenvelope(5, 50, 5.1, 50.1, 4326);
SELECT round((:before_declare - tokens)::numeric, 2) AS at_declare FROM throttle_peek(current_user);
FETCH 10 FROM c \g /dev/null
FETCH 10 FROM c \g /dev/null
SELECT round((:before_declare - tokens)::numeric, 2) AS after_fetches FROM throttle_peek(current_user);
COMMIT;

-- Refusals: short on tokens, and a statement that can never fit.
SELECT throttle_reset(current_user);
SET ogc_throttle.capacity = 0.5;  -- a price over half of it (0.43 with a statement at 0.05 ms)
SET ogc_throttle.rate = 0.013;  -- keeps the retry time clear of a whole second
SET ogc_throttle.cost_max = 1000;
-- A price over half the capacity, whatever the default weights: the first fits, the second does not.
SET ogc_throttle.join_row_cost = 0.0014;
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05);
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05);
SELECT count(*) FROM hook_pts WHERE geom && ST_MakeEnvelope(5, 50, 5.5, 50.5, 4326);
SET ogc_throttle.cost_max = 20;
SET ogc_throttle.rate = 0.01;
RESET ogc_throttle.capacity;
RESET ogc_throttle.join_row_cost;

-- log (shadow) mode: nothing is charged, would-be refusals are logged and counted.
SET ogc_throttle.mode = 'log';
SET client_min_messages = log;
SELECT throttle_reset(current_user);
SET ogc_throttle.capacity = 0.1;
SELECT charged_by($$SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.05)$$) AS shadow;
RESET client_min_messages;
RESET ogc_throttle.capacity;
SELECT statements_priced > 0 AS priced, shadow_refusals, refusals, never_fits FROM throttle_stats;

-- Identity: who pays. A superuser may set it; SET LOCAL lasts one transaction.
SET ogc_throttle.mode = 'reject';
SET ogc_throttle.identity = 'request-7';
SELECT identity FROM throttle_peek();
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.01);
BEGIN;
SET LOCAL ogc_throttle.identity = 'request-8';
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.01);
COMMIT;
SHOW ogc_throttle.identity;
RESET ogc_throttle.identity;
SELECT identity, tokens < capacity - 0.01 AS charged FROM throttle_buckets WHERE identity LIKE 'request-%' ORDER BY 1;
SELECT show_error($$SET ogc_throttle.identity = '0123456789012345678901234567890123456789012345678901234567890123'$$);

-- An ordinary role cannot choose who pays, not even through ALTER ROLE on
-- itself; a trusted pooler role (granted throttle_spend on any identity) can.
CREATE ROLE regress_ot_tiles LOGIN;
CREATE ROLE regress_ot_pool LOGIN;
GRANT SELECT ON hook_pts TO regress_ot_tiles, regress_ot_pool;
GRANT EXECUTE ON FUNCTION throttle_spend(text, float8) TO regress_ot_pool;
ALTER ROLE regress_ot_tiles SET ogc_throttle.mode = 'reject';
ALTER ROLE regress_ot_tiles SET ogc_throttle.capacity = 10;
ALTER ROLE regress_ot_tiles SET ogc_throttle.cost_max = 10;
ALTER ROLE regress_ot_tiles SET ogc_throttle.rate = 0.01;
ALTER ROLE regress_ot_pool SET ogc_throttle.mode = 'reject';
ALTER ROLE regress_ot_pool SET ogc_throttle.rate = 0.01;
\c - regress_ot_tiles
SHOW ogc_throttle.mode;
SELECT show_error($$SET ogc_throttle.mode = 'off'$$);
SELECT show_error($$SET ogc_throttle.identity = 'someone-else'$$);
SELECT show_error($$SELECT * FROM throttle_explain('SELECT * FROM pg_authid')$$);
SELECT show_error($$ALTER ROLE regress_ot_tiles SET ogc_throttle.identity = 'someone-else'$$);
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.02);
SELECT identity, round(tokens::numeric, 1) AS tokens FROM throttle_peek();
\c - regress_ot_tiles
SHOW ogc_throttle.identity;
\c - regress_ot_pool
SET ogc_throttle.identity = 'end-user-1';
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.02);
SELECT identity FROM throttle_peek();
\c - postgres
-- Per-identity statistics of the hook (statements counted since the stats reset above).
-- A session's admitted statements reach them in batches, the last when it
-- exits: psql's \c closes the old session without waiting for it. (A
-- transaction reads pg_stat_activity once and keeps what it read: each turn
-- clears that, or a session still exiting at the first read is waited for 30 s.)
DO $$BEGIN
  FOR i IN 1..3000 LOOP
    PERFORM pg_stat_clear_snapshot();
    EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE usename IN ('regress_ot_tiles', 'regress_ot_pool'));
    PERFORM pg_sleep(0.01);
  END LOOP;
END$$;
SELECT identity, statements, refused, delayed, cost_charged > 0 AS charged
  FROM throttle_identity_stats ORDER BY identity;
-- A session reading them sees its own statements (its batch is written
-- first), and a reset forgets the ones it made before it.
SET ogc_throttle.mode = 'reject';
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.01);
SELECT throttle_stats_reset();
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.01);
SELECT count(*) FROM hook_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.5 50.5)'::geometry, 0.02);
SELECT identity, statements, refused, cost_charged > 0 AS charged FROM throttle_identity_stats WHERE identity = 'postgres';
RESET ogc_throttle.mode;
SELECT identity, tokens < capacity - 0.01 AS charged FROM throttle_buckets WHERE identity IN ('regress_ot_tiles', 'end-user-1', 'someone-else') ORDER BY 1;
ALTER ROLE regress_ot_tiles RESET ALL;
REVOKE ALL ON hook_pts FROM regress_ot_tiles;
DROP ROLE regress_ot_tiles;
REVOKE ALL ON FUNCTION throttle_spend(text, float8) FROM regress_ot_pool;
ALTER ROLE regress_ot_pool RESET ALL;
REVOKE ALL ON hook_pts FROM regress_ot_pool;
DROP ROLE regress_ot_pool;
SELECT throttle_reset_all() >= 0 AS reset;
