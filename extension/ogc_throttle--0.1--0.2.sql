-- ogc_throttle 0.1 -> 0.2
\echo Use "ALTER EXTENSION ogc_throttle UPDATE TO '0.2'" to load this file. \quit

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
