-- Issue 9's deterministic parts: who pays under SET ROLE, pricing never runs
-- what the caller may not run or reads what it may not read, a budget the
-- bucket cannot represent is an error, and the 0.2 SQL surface.
-- (Measured time, debt, cancellation and cursor passes: test/pg/metering.t.sh.)
CREATE ROLE regress_ot_login LOGIN;
CREATE ROLE regress_ot_group NOLOGIN;
GRANT regress_ot_group TO regress_ot_login;
CREATE TABLE metering_pts AS
  SELECT i AS id, ST_SetSRID(ST_MakePoint(5 + (i % 100) * 0.001, 50 + (i / 100) * 0.001), 4326) AS geom
    FROM generate_series(1, 2000) i;
CREATE INDEX ON metering_pts USING gist (geom);
ANALYZE metering_pts;
GRANT SELECT ON metering_pts TO regress_ot_group;
-- A SECURITY DEFINER function the throttled role may not execute, that
-- shows when called: pricing must not call it.
CREATE FUNCTION metering_secret_radius() RETURNS float8 LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
BEGIN
    RAISE NOTICE 'metering_secret_radius was called';
    RETURN 0.0123;
END $$;
REVOKE ALL ON FUNCTION metering_secret_radius() FROM PUBLIC;
CREATE TABLE metering_hidden AS SELECT * FROM metering_pts;
ANALYZE metering_hidden;
ALTER ROLE regress_ot_login SET ogc_throttle.mode = 'reject';
ALTER ROLE regress_ot_login SET ogc_throttle.capacity = 1000;
ALTER ROLE regress_ot_login SET ogc_throttle.rate = 0.01;

\c - regress_ot_login
-- SET ROLE to a group role: the login role still pays, no second budget.
SELECT identity FROM throttle_peek();
SET ROLE regress_ot_group;
SELECT identity FROM throttle_peek();
SELECT count(*) FROM metering_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.05 50.05)'::geometry, 0.01);
RESET ROLE;
SELECT identity FROM throttle_peek() WHERE tokens < capacity;

-- Not allowed to run the function: the executor says so before pricing, and
-- the function is never called (no NOTICE), nor is its value shown.
SELECT count(*) FROM metering_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.05 50.05)'::geometry, metering_secret_radius());
SELECT * FROM throttle_explain($$SELECT count(*) FROM metering_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.05 50.05)'::geometry, metering_secret_radius())$$);
-- Not allowed to read the table: a permission error, no row estimate in a refusal.
SELECT count(*) FROM metering_hidden WHERE geom && ST_MakeEnvelope(5, 50, 6, 51, 4326);
SELECT * FROM throttle_explain($$SELECT count(*) FROM metering_hidden WHERE geom && ST_MakeEnvelope(5, 50, 6, 51, 4326)$$);

-- What this session's last statement was estimated at (with true_up off in
-- these suites, the estimate is the charge).
SELECT count(*) FROM metering_pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(5.05 50.05)'::geometry, 0.01);
SELECT estimate > 0 AS estimated, measured >= 0 AS measured, charged = estimate AS charged_estimate, cutoff
  FROM throttle_last_statement();

\c - postgres
-- A budget whose refill time the bucket cannot represent: every statement is
-- an error (priced or not), never a pass.
SET ogc_throttle.mode = 'reject';
SET ogc_throttle.capacity = 1e9;
SET ogc_throttle.rate = 0.01;
SELECT count(*) FROM metering_pts WHERE geom && ST_MakeEnvelope(5, 50, 5.1, 50.1, 4326);
SELECT 1;
RESET ogc_throttle.capacity;
RESET ogc_throttle.rate;
RESET ogc_throttle.mode;
-- The new settings and their bounds.
SHOW ogc_throttle.true_up;
SHOW ogc_throttle.cutoff_grace;
SELECT show_error($$SET ogc_throttle.cutoff_grace = -2$$);
-- Weights that are not finite non-negative numbers never become prices.
SELECT show_error($$SET ogc_throttle.radius_row_cost = 'NaN'$$);
SELECT show_error($$SET ogc_throttle.bbox_fixed_cost = -1$$);
SELECT show_error($$SET ogc_throttle.capacity = 'Infinity'$$);

DROP TABLE metering_pts, metering_hidden;
DROP FUNCTION metering_secret_radius();
DROP OWNED BY regress_ot_login;
DROP ROLE regress_ot_login, regress_ot_group;
