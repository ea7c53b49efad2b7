-- ogc_throttle 0.1 -> 0.2: one cost unit is one millisecond of server time;
-- estimates admit statements, measured time settles them.
\echo Use "ALTER EXTENSION ogc_throttle UPDATE TO '0.2'" to load this file. \quit

------------------------------------------------------------------------------
-- Statistics gain measured time and cancellations (appended columns: the
-- library reads a 0.1 row shape as the prefix of this one).
------------------------------------------------------------------------------
DROP VIEW throttle_stats;
DROP FUNCTION throttle_stats_row();
CREATE FUNCTION throttle_stats_row(
        OUT spends bigint, OUT refusals bigint, OUT never_fits bigint, OUT cost_charged float8,
        OUT identities bigint, OUT max_identities bigint, OUT evicted_full bigint, OUT evicted_lossy bigint,
        OUT statements_priced bigint, OUT statements_delayed bigint, OUT delay_seconds float8,
        OUT shadow_refusals bigint, OUT stats_reset timestamptz, OUT measured_ms float8, OUT cutoffs bigint)
    AS 'MODULE_PATHNAME', 'throttle_stats' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE VIEW throttle_stats AS SELECT * FROM throttle_stats_row();
COMMENT ON VIEW throttle_stats IS
    'Spends admitted, refusals, never-fit refusals, milliseconds charged, table size, evictions (lossy = a non-full bucket forgotten), the pricing hook''s statements priced, delayed, time delayed and shadow-mode refusals, executor milliseconds measured, and statements cancelled for running past their budget.';

DROP VIEW throttle_identity_stats;
DROP FUNCTION throttle_identity_stats_all();
CREATE FUNCTION throttle_identity_stats_all(
        OUT identity text, OUT statements bigint, OUT refused bigint, OUT delayed bigint,
        OUT delay_seconds float8, OUT cost_charged float8, OUT last_statement timestamptz, OUT measured_ms float8)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_identity_stats' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE VIEW throttle_identity_stats AS SELECT * FROM throttle_identity_stats_all();
COMMENT ON VIEW throttle_identity_stats IS
    'Per identity, statements the pricing hook admitted, refused (or in log mode would have), delayed, time delayed, milliseconds charged (estimates settled against measured time) and executor milliseconds measured.';

REVOKE ALL ON FUNCTION throttle_stats_row(), throttle_identity_stats_all() FROM PUBLIC;
REVOKE ALL ON throttle_stats, throttle_identity_stats FROM PUBLIC;
GRANT SELECT ON throttle_stats, throttle_identity_stats TO pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_stats_row(), throttle_identity_stats_all() TO pg_monitor;

------------------------------------------------------------------------------
-- What this session's last statement was estimated at, used and was charged.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_last_statement(OUT estimate float8, OUT measured float8, OUT charged float8,
        OUT cutoff boolean)
    AS 'MODULE_PATHNAME', 'throttle_last_statement' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION throttle_last_statement() IS
    'This session''s last finished statement under the pricing hook: its estimate (ms, nested statements included), executor milliseconds measured over every pass, milliseconds net charged, and whether it was cancelled for running past its budget. NULLs before the first.';

------------------------------------------------------------------------------
-- Calibration: weights fitted from what priced statements really took.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_calibrate(apply boolean DEFAULT false,
        OUT class text, OUT samples bigint, OUT fixed float8, OUT per_row float8,
        OUT fitted_fixed float8, OUT fitted_per_row float8, OUT fitted boolean,
        OUT samples_used bigint, OUT spearman_configured float8, OUT spearman_fitted float8,
        OUT median_ratio float8)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_calibrate' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_calibrate(boolean) IS
    'Fits the weights of every cost class from the sample store (non-negative least squares, each sample weighted by 1/measured, then reshaped for the under-priced tail at the same level) and shows them beside the configured ones, with the Spearman rank correlation of each model''s estimates with the measured times and the median measured/fitted ratio; apply => true stores the fit (used when ogc_throttle.calibration = apply). Raises 55000 when there are too few samples.';
CREATE FUNCTION throttle_calibration_all(
        OUT class text, OUT samples bigint, OUT fixed float8, OUT per_row float8,
        OUT fitted_fixed float8, OUT fitted_per_row float8, OUT fitted boolean,
        OUT samples_used bigint, OUT spearman_configured float8, OUT spearman_fitted float8,
        OUT median_ratio float8)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_calibration_all' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE VIEW throttle_calibration AS SELECT * FROM throttle_calibration_all();
COMMENT ON VIEW throttle_calibration IS
    'What throttle_calibrate() would fit now, without storing it; no rows while no sample is kept.';
CREATE FUNCTION throttle_samples(OUT measured float8, OUT estimate float8, OUT classes text, OUT features json)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_samples' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_samples() IS
    'The kept calibration samples, oldest first: the milliseconds each priced statement took (its executor passes and the server time of its messages outside them: parsing, planning, the answer), its estimate with the configured weights, the cost classes its estimate was made of, and the quantities the fit reads (as throttle_features: {"class": [calls, rows]}).';
REVOKE ALL ON FUNCTION throttle_calibrate(boolean), throttle_calibration_all(), throttle_samples() FROM PUBLIC;
REVOKE ALL ON throttle_calibration FROM PUBLIC;
GRANT SELECT ON throttle_calibration TO pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_calibration_all(), throttle_samples() TO pg_monitor;

------------------------------------------------------------------------------
-- fidelity: plan-wide pricing — density grids and the price's feature vector.
------------------------------------------------------------------------------
CREATE TABLE throttle_density (
    relid oid NOT NULL,
    attnum int2 NOT NULL,
    grid bytea NOT NULL,
    rows_counted float8 NOT NULL,
    cells bigint NOT NULL,
    built timestamptz NOT NULL,
    PRIMARY KEY (relid, attnum)
);
COMMENT ON TABLE throttle_density IS
    'Density grids of geometry/geography columns (throttle_density_build); the pricing hook reads them to estimate rows in small areas.';
REVOKE ALL ON throttle_density FROM PUBLIC;

CREATE FUNCTION throttle_density_build(rel regclass, col name) RETURNS bigint
    AS 'MODULE_PATHNAME', 'throttle_density_build' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_density_build(regclass, name) IS
    'Count where the rows of a geometry/geography column are (a multi-resolution grid) for the pricing hook; returns the cells stored. Rebuild after large changes.';
REVOKE ALL ON FUNCTION throttle_density_build(regclass, name) FROM PUBLIC;

CREATE FUNCTION throttle_features(query text, OUT class text, OUT calls float8, OUT rows float8)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_features' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_features(text) IS
    'The quantities a statement is priced from, per cost class (calls charged the fixed term, rows charged the per-row term; class "unpriced" counts terms at cost_max): price = sum of weight x quantity.';

-- Which spatial columns the hook prices from a grid, and which from PostGIS's statistics alone (which
-- can see 50 rows where a dense city core holds 17 000: doc/cost-model.md): every geometry and
-- geography column of this database's tables and materialized views, whether an index serves it, and
-- its grid's build time and row count next to the table's current estimate (a grid that drifted from it
-- wants a rebuild).
CREATE VIEW throttle_density_coverage AS
SELECT c.oid::regclass AS relation, a.attname AS column_name, t.typname AS column_type,
       EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
                WHERE i.indrelid = c.oid AND a.attnum = ANY (i.indkey::int2[])
                  AND am.amname IN ('gist', 'spgist', 'brin')) AS indexed,
       c.reltuples::float8 AS rows_estimated, d.built AS grid_built, d.rows_counted AS grid_rows
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid AND t.typname IN ('geometry', 'geography')
  LEFT JOIN throttle_density d ON d.relid = c.oid AND d.attnum = a.attnum
 WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%';
COMMENT ON VIEW throttle_density_coverage IS
    'Geometry and geography columns of this database: indexed, and the density grid the pricing hook reads (grid_built NULL: none; PostGIS''s statistics then, which miss small dense areas; build one with throttle_density_build).';
REVOKE ALL ON throttle_density_coverage FROM PUBLIC;
GRANT SELECT ON throttle_density_coverage TO pg_monitor;

------------------------------------------------------------------------------
-- density grids in shared memory (ogc_throttle.density_shared_memory).
------------------------------------------------------------------------------
CREATE FUNCTION throttle_density_shared_all(OUT database oid, OUT relid oid, OUT attnum int2, OUT bytes bigint,
        OUT readers int, OUT replaced boolean, OUT last_used timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_density_shared_all' LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE VIEW throttle_density_shared AS SELECT * FROM throttle_density_shared_all();
COMMENT ON VIEW throttle_density_shared IS
    'Density grids in the shared store, every database''s: readers = transactions reading it now; replaced = superseded or evicted, freed when its last reader ends.';
CREATE FUNCTION throttle_density_shared_stats(OUT size_bytes bigint, OUT used_bytes bigint, OUT grids int,
        OUT loads bigint, OUT shares bigint, OUT evictions bigint, OUT replacements bigint, OUT refused bigint)
    RETURNS record
    AS 'MODULE_PATHNAME', 'throttle_density_shared_stats' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_density_shared_stats() IS
    'The density grids'' shared store: its size, bytes held, grids, loads (grids read from the table into it), shares (a backend found its copy), evictions, replacements (a rebuilt grid), refused (did not fit: read by each backend); NULLs without a store.';
REVOKE ALL ON FUNCTION throttle_density_shared_all(), throttle_density_shared_stats() FROM PUBLIC;
REVOKE ALL ON throttle_density_shared FROM PUBLIC;
GRANT SELECT ON throttle_density_shared TO pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_density_shared_all(), throttle_density_shared_stats() TO pg_monitor;

------------------------------------------------------------------------------
-- roles' settings as their sessions start, and upkeep no budget pays for.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_role_settings(role regrole, OUT mode text, OUT true_up boolean, OUT capacity float8,
        OUT rate float8, OUT cutoff_grace_ms int, OUT identity text, OUT charged boolean)
    RETURNS record
    AS 'MODULE_PATHNAME', 'throttle_role_settings' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION throttle_role_settings(regrole) IS
    'How the role''s sessions are metered in this database as they start (ALTER ROLE ... IN DATABASE over ALTER ROLE over ALTER DATABASE over ALTER ROLE ALL over the server''s): what autovacuum''s charge to a table''s owner reads. identity NULL: the role''s name; charged: mode reject or delay with true_up on.';
-- Autovacuum's upkeep of a table, and its index functions' work, are charged to the table's owner. A table
-- whose owner's settings charge nothing, and that a metered role may alter (set its autovacuum thresholds)
-- as a member of the owner, has upkeep its members can cause for free: since 2026-12-05 a metered session
-- may not give a table to such an owner, and this lists the tables given before.
CREATE VIEW throttle_unpaid_upkeep AS
WITH owners AS (
    SELECT DISTINCT c.relowner
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'm') AND c.relpersistence <> 't'
       AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
), unpaid AS (
    SELECT o.relowner, array_agg(m.oid::regrole ORDER BY m.rolname) AS metered_members
      FROM owners o
      JOIN pg_roles m ON m.oid <> o.relowner AND m.rolcanlogin AND NOT m.rolsuper
                     AND pg_has_role(m.oid, o.relowner, 'MEMBER')
     WHERE NOT (throttle_role_settings(o.relowner::regrole)).charged
       AND (throttle_role_settings(m.oid::regrole)).charged
     GROUP BY o.relowner
)
SELECT c.oid::regclass AS relation, c.relowner::regrole AS owner, u.metered_members
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN unpaid u ON u.relowner = c.relowner
 WHERE c.relkind IN ('r', 'm') AND c.relpersistence <> 't'
   AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%';
COMMENT ON VIEW throttle_unpaid_upkeep IS
    'Tables and materialized views whose owner''s settings charge nothing while metered login roles are members of the owner (and may set the table''s autovacuum thresholds): their upkeep is on no budget. Fix: ALTER ROLE owner SET ogc_throttle.mode = ''reject'' (and a budget), or give the table to a role that is not such a group.';
REVOKE ALL ON FUNCTION throttle_role_settings(regrole) FROM PUBLIC;
REVOKE ALL ON throttle_unpaid_upkeep FROM PUBLIC;
GRANT EXECUTE ON FUNCTION throttle_role_settings(regrole) TO pg_monitor;
GRANT SELECT ON throttle_unpaid_upkeep TO pg_monitor;
