-- ogc_throttle 0.1: shared token buckets and PostGIS cost estimators.
\echo Use "CREATE EXTENSION ogc_throttle" to load this file. \quit

------------------------------------------------------------------------------
-- Spending. Not strict: a NULL argument is an error, never a silent allow.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_spend(identity text, cost float8) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_spend' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_spend(text, float8) IS
    'Charge cost to identity''s bucket; returns the tokens left, or raises 53T01 (retry later) / 54T01 (never fits).';

CREATE FUNCTION throttle_spend(cost float8) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_spend_own' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_spend(float8) IS
    'Charge cost to the current role''s own bucket; raises like throttle_spend(identity, cost).';

CREATE FUNCTION throttle_try_spend(identity text, cost float8,
        OUT allowed boolean, OUT remaining float8, OUT retry_after_s float8, OUT reset_after_s float8)
    AS 'MODULE_PATHNAME', 'throttle_try_spend' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_try_spend(text, float8) IS
    'Charge cost if it fits and return the verdict instead of raising; retry_after_s is NULL when it can never fit.';

------------------------------------------------------------------------------
-- Inspecting and resetting.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_peek(identity text,
        OUT identity text, OUT tokens float8, OUT capacity float8, OUT rate float8,
        OUT throttled boolean, OUT last_request timestamptz, OUT full_at timestamptz)
    AS 'MODULE_PATHNAME', 'throttle_peek' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_peek(text) IS
    'The bucket of identity without charging it; an unknown identity shows a full bucket of the caller''s budget.';

CREATE FUNCTION throttle_peek(
        OUT identity text, OUT tokens float8, OUT capacity float8, OUT rate float8,
        OUT throttled boolean, OUT last_request timestamptz, OUT full_at timestamptz)
    AS 'MODULE_PATHNAME', 'throttle_peek_own' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_peek() IS 'The current role''s own bucket.';

CREATE FUNCTION throttle_reset(identity text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'throttle_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_reset(text) IS 'Forget identity''s bucket (it is full again); true if it existed.';

CREATE FUNCTION throttle_reset_all() RETURNS bigint
    AS 'MODULE_PATHNAME', 'throttle_reset_all' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_reset_all() IS 'Forget every bucket; returns how many there were.';

CREATE FUNCTION throttle_stats_reset() RETURNS void
    AS 'MODULE_PATHNAME', 'throttle_stats_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_stats_reset() IS 'Zero the counters of throttle_stats and forget throttle_identity_stats.';

CREATE FUNCTION throttle_buckets_all(
        OUT identity text, OUT tokens float8, OUT capacity float8, OUT rate float8,
        OUT throttled boolean, OUT last_request timestamptz, OUT full_at timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_buckets' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION throttle_stats_row(
        OUT spends bigint, OUT refusals bigint, OUT never_fits bigint, OUT cost_charged float8,
        OUT identities bigint, OUT max_identities bigint, OUT evicted_full bigint, OUT evicted_lossy bigint,
        OUT statements_priced bigint, OUT statements_delayed bigint, OUT delay_seconds float8,
        OUT shadow_refusals bigint, OUT stats_reset timestamptz)
    AS 'MODULE_PATHNAME', 'throttle_stats' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION throttle_identity_stats_all(
        OUT identity text, OUT statements bigint, OUT refused bigint, OUT delayed bigint,
        OUT delay_seconds float8, OUT cost_charged float8, OUT last_statement timestamptz)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_identity_stats' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW throttle_identity_stats AS SELECT * FROM throttle_identity_stats_all();
COMMENT ON VIEW throttle_identity_stats IS
    'Per identity, statements the pricing hook priced, refused (or in log mode would have), delayed, time delayed and cost charged.';

CREATE VIEW throttle_buckets AS SELECT * FROM throttle_buckets_all();
COMMENT ON VIEW throttle_buckets IS
    'Every bucket not yet forgotten: tokens now, the budget it was last charged under, and whether its last request was refused.';

CREATE VIEW throttle_stats AS SELECT * FROM throttle_stats_row();
COMMENT ON VIEW throttle_stats IS
    'Spends admitted, refusals, never-fit refusals, cost charged, table size, evictions (lossy = a non-full bucket forgotten), and the pricing hook''s statements priced, delayed, time delayed and shadow-mode refusals.';

CREATE FUNCTION throttle_explain(query text, OUT statement integer, OUT call text, OUT cost float8)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'throttle_explain' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION throttle_explain(text) IS
    'Plans query (without running or charging it) and shows how the pricing hook prices each PostGIS call and the statement.';

------------------------------------------------------------------------------
-- Estimators. STABLE: they read GUC weights and spatial_ref_sys.
------------------------------------------------------------------------------
CREATE FUNCTION throttle_cost_bbox(xmin float8, ymin float8, xmax float8, ymax float8, srid integer)
    RETURNS float8 AS 'MODULE_PATHNAME', 'throttle_cost_bbox' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_bbox(float8, float8, float8, float8, integer) IS
    'Cost of a query over this box: fixed + per-row x (area x ogc_throttle.density), clamped at ogc_throttle.cost_max.';

CREATE FUNCTION throttle_cost_bbox(xmin float8, ymin float8, xmax float8, ymax float8, srid integer, max_rows bigint)
    RETURNS float8 AS 'MODULE_PATHNAME', 'throttle_cost_bbox' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_bbox(float8, float8, float8, float8, integer, bigint) IS
    'Cost of a query over this box whose rows are capped by max_rows (its LIMIT).';

CREATE FUNCTION throttle_cost_radius(radius_m float8) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_cost_radius' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_radius(float8) IS
    'Cost of a radius search of radius_m metres (area pi r^2 x density).';

CREATE FUNCTION throttle_cost_radius(radius float8, srid integer) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_cost_radius_srid' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_radius(float8, integer) IS
    'Cost of a radius search with the radius in the units of srid (degrees of a geographic SRID count as equatorial degrees).';

CREATE FUNCTION throttle_cost_features(count bigint) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_cost_features' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_features(bigint) IS 'Cost of returning count features.';

CREATE FUNCTION throttle_cost_tile(zoom integer) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_cost_tile' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_tile(integer) IS
    'Cost of a Web Mercator tile at zoom 0-31, rows capped at ogc_throttle.tile_max_rows.';

CREATE FUNCTION throttle_cost_tile(zoom integer, max_rows bigint) RETURNS float8
    AS 'MODULE_PATHNAME', 'throttle_cost_tile' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION throttle_cost_tile(integer, bigint) IS 'Cost of a tile whose query has LIMIT max_rows.';

-- Geometry and box2d faces call PostGIS, schema-qualified wherever PostGIS
-- lives. PL/pgSQL so that a NULL geometry is reported as such.
DO $do$
DECLARE
    pg text := (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                WHERE e.extname = 'postgis');
    null_check text := $n$
        IF %1$s IS NULL THEN
            RAISE EXCEPTION 'ogc_throttle: %1$s must not be NULL' USING ERRCODE = '22004',
                DETAIL = 'A NULL argument is never read as zero or as a free pass.';
        END IF;$n$;
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION @extschema@.throttle_cost_bbox(box %1$s.box2d, srid integer) RETURNS float8
        LANGUAGE plpgsql STABLE PARALLEL SAFE AS $b$
        BEGIN %2$s
            RETURN @extschema@.throttle_cost_bbox(%1$s.st_xmin(box), %1$s.st_ymin(box), %1$s.st_xmax(box),
                                                  %1$s.st_ymax(box), srid);
        END $b$ $f$, pg, format(null_check, 'box'));
    EXECUTE format($f$
        CREATE FUNCTION @extschema@.throttle_cost_bbox(geom %1$s.geometry) RETURNS float8
        LANGUAGE plpgsql STABLE PARALLEL SAFE AS $b$
        BEGIN %2$s
            IF %1$s.st_isempty(geom) THEN  -- searches nothing: the fixed cost only
                RETURN @extschema@.throttle_cost_bbox(0, 0, 0, 0, %1$s.st_srid(geom));
            END IF;
            RETURN @extschema@.throttle_cost_bbox(%1$s.st_xmin(geom), %1$s.st_ymin(geom), %1$s.st_xmax(geom),
                                                  %1$s.st_ymax(geom), %1$s.st_srid(geom));
        END $b$ $f$, pg, format(null_check, 'geom'));
    EXECUTE format($f$
        CREATE FUNCTION @extschema@.throttle_cost_radius(geom %1$s.geometry, radius float8) RETURNS float8
        LANGUAGE plpgsql STABLE PARALLEL SAFE AS $b$
        BEGIN %2$s
            RETURN @extschema@.throttle_cost_radius(radius, %1$s.st_srid(geom));
        END $b$ $f$, pg, format(null_check, 'geom'));
END
$do$;
COMMENT ON FUNCTION throttle_cost_bbox(box2d, integer) IS 'Cost of a query over this box, in the units of srid.';
COMMENT ON FUNCTION throttle_cost_bbox(geometry) IS 'Cost of a query over the bounding box of geom, in its SRID.';
COMMENT ON FUNCTION throttle_cost_radius(geometry, float8) IS
    'Cost of a radius search around geom, the radius in the units of geom''s SRID.';

------------------------------------------------------------------------------
-- Privileges. Spending on an arbitrary identity could drain someone else's
-- budget, so only roles an administrator trusts get it; anyone may spend on
-- and look at their own bucket, and price a request.
------------------------------------------------------------------------------
REVOKE ALL ON FUNCTION throttle_spend(text, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_try_spend(text, float8) FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_peek(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_reset(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_reset_all() FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_stats_reset() FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_buckets_all() FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_stats_row() FROM PUBLIC;
REVOKE ALL ON FUNCTION throttle_identity_stats_all() FROM PUBLIC;
REVOKE ALL ON throttle_buckets, throttle_stats, throttle_identity_stats FROM PUBLIC;

-- Functions in a view run with the caller's EXECUTE privilege, hence both grants.
GRANT SELECT ON throttle_buckets, throttle_stats, throttle_identity_stats TO pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_buckets_all(), throttle_stats_row(), throttle_identity_stats_all() TO pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_peek(text) TO pg_monitor;
