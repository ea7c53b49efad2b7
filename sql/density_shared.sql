-- Density grids in shared memory (ogc_throttle.density_shared_memory, on by default): a grid
-- priced once is in the store, pinned only while a transaction reads it; a build this
-- transaction has not committed is priced from a copy of its own and never shared; a committed
-- rebuild replaces the store's copy. test/pg/density_shared.t.sh: several backends, eviction,
-- small stores, 0, concurrency.
SELECT name, setting, unit, context FROM pg_settings WHERE name = 'ogc_throttle.density_shared_memory';
SELECT setseed(0.75);
CREATE TABLE ds_pts AS
  SELECT i AS id, ST_SetSRID(ST_MakePoint(10 + (random() - 0.5) * 0.02, 50 + (random() - 0.5) * 0.02), 4326)::geometry(Point, 4326) AS geom
    FROM generate_series(1, 5000) i;
CREATE INDEX ON ds_pts USING gist (geom);
ANALYZE ds_pts;
SET max_parallel_workers_per_gather = 0;
CREATE FUNCTION ds_rows(h float8 DEFAULT 0.005) RETURNS float8 LANGUAGE sql AS $$
  SELECT rows FROM throttle_features(format('SELECT id FROM ds_pts WHERE geom && ST_MakeEnvelope(%s, %s, %s, %s, 4326)',
                                            10 - h, 50 - h, 10 + h, 50 + h))
   WHERE class = 'scan' $$;
CREATE TABLE ds_counters AS SELECT * FROM throttle_density_shared_stats();
CREATE FUNCTION ds_delta(OUT loads bigint, OUT shares bigint, OUT replacements bigint) LANGUAGE sql AS $$
  SELECT s.loads - c.loads, s.shares - c.shares, s.replacements - c.replacements
    FROM throttle_density_shared_stats() s, ds_counters c $$;
CREATE FUNCTION ds_entry(OUT bytes_match boolean, OUT readers int, OUT replaced boolean) RETURNS SETOF record LANGUAGE sql AS $$
  SELECT s.bytes = octet_length(d.grid), s.readers, s.replaced
    FROM throttle_density_shared s LEFT JOIN throttle_density d ON d.relid = s.relid AND d.attnum = s.attnum
   WHERE s.relid = 'ds_pts'::regclass AND s.database = (SELECT oid FROM pg_database WHERE datname = current_database()) $$;
SELECT throttle_density_build('ds_pts', 'geom') > 0 AS built;
SELECT ds_rows() BETWEEN 800 AND 2000 AS priced_from_the_grid;
SELECT * FROM ds_delta();
SELECT * FROM ds_entry();
-- Pinned while a transaction reads it, and only then (another box: the last one's rows are remembered).
BEGIN;
SELECT ds_rows(0.004) BETWEEN 400 AND 1500 AS priced_again;
SELECT readers FROM ds_entry();
COMMIT;
SELECT readers FROM ds_entry();
-- An error ends the transaction and its pins alike.
BEGIN;
SELECT ds_rows(0.003) > 0 AS priced_before_the_error;
SELECT readers FROM ds_entry();
SELECT 1 / 0;
ROLLBACK;
SELECT readers FROM ds_entry();
-- A rebuild not yet committed: priced from this transaction's own copy, the store untouched.
INSERT INTO ds_pts SELECT 10000 + i, ST_SetSRID(ST_MakePoint(10, 50), 4326) FROM generate_series(1, 3000) i;
BEGIN;
SELECT throttle_density_build('ds_pts', 'geom') > 0 AS rebuilt_uncommitted;
SELECT ds_rows() > 3500 AS sees_its_own_build;
-- (the store's copy is not the grid this transaction sees)
SELECT bytes_match, replaced FROM ds_entry();
ROLLBACK;
SELECT ds_rows() BETWEEN 800 AND 2000 AS rolled_back_prices_the_old;
SELECT * FROM ds_delta();
-- Committed: the next backend to price it (here this one) replaces the store's copy.
SELECT throttle_density_build('ds_pts', 'geom') > 0 AS rebuilt;
SELECT ds_rows() > 3500 AS priced_from_the_rebuild;
SELECT * FROM ds_delta();
SELECT * FROM ds_entry();
-- Monitoring roles may read the store; others may not.
SELECT has_table_privilege('pg_monitor', 'throttle_density_shared', 'SELECT') AS monitor_reads,
       has_table_privilege('public', 'throttle_density_shared', 'SELECT') AS public_reads;
RESET max_parallel_workers_per_gather;
DELETE FROM throttle_density WHERE relid = 'ds_pts'::regclass;
DROP TABLE ds_pts, ds_counters;
DROP FUNCTION ds_rows(float8), ds_delta(), ds_entry();
