-- Estimators: values, monotonicity, clamps, units and bad input.
-- Defaults (milliseconds): density 10/km², bbox 0.025 + 0.002 per row, radius 0.037 + 0.003,
-- features 0.025 + 0.002, tile 0.022 + 0.005, cost_max 500.
SELECT name, setting FROM pg_settings
 WHERE name ~ '^ogc_throttle\.(density|cost_max|tile_max_rows|bbox_.*|radius_.*|features_.*|tile_.*)$' ORDER BY name;

-- Exact values: 1 km² in metres → 10 rows → 0.045.
SELECT round(throttle_cost_bbox(0, 0, 1000, 1000, 3857)::numeric, 6) AS one_km2;
-- A max_rows (LIMIT) caps the rows: 10 km² = 100 rows → 0.225, LIMIT 20 → 0.065.
SELECT round(throttle_cost_bbox(0, 0, 10000, 1000, 3857)::numeric, 6) AS ten_km2,
       round(throttle_cost_bbox(0, 0, 10000, 1000, 3857, 20)::numeric, 6) AS ten_km2_limit_20;
-- 1°×1° at the equator is about 12364 km² on the sphere.
SET ogc_throttle.cost_max = 1e9;
SELECT round(((throttle_cost_bbox(0, 0, 1, 1, 4326) - 0.025) / 0.002 / 10)::numeric) AS km2_1deg_equator,
       round(((throttle_cost_bbox(0, 60, 1, 61, 4326) - 0.025) / 0.002 / 10)::numeric) AS km2_1deg_at_60n;
RESET ogc_throttle.cost_max;
-- Radius: π r² × density. 1 km → π km² → 31.4 rows.
SELECT round(throttle_cost_radius(1000)::numeric, 6) AS r_1km;
-- Features: fixed + per row.
SELECT throttle_cost_features(0) AS f0, throttle_cost_features(100) AS f100;
-- Tiles: z16 is cheap, z0 is capped at tile_max_rows (50000 × 0.005 + 0.022 = 250.022).
SELECT round(throttle_cost_tile(16)::numeric, 4) AS z16, throttle_cost_tile(0) AS z0,
       throttle_cost_tile(0, 1000) AS z0_limit_1000;

-- Monotonic: more area, radius, features or a lower zoom never costs less.
SELECT bool_and(throttle_cost_radius(r) <= throttle_cost_radius(r * 1.5)) AS radius_monotonic
  FROM generate_series(0, 60) g, LATERAL (SELECT power(1.5, g) - 1 AS r) x;
SELECT bool_and(throttle_cost_bbox(0, 0, s, s, 3857) <= throttle_cost_bbox(0, 0, s * 2, s * 2, 3857)) AS bbox_monotonic
  FROM generate_series(0, 40) g, LATERAL (SELECT power(2, g) AS s) x;
SELECT bool_and(throttle_cost_tile(z) >= throttle_cost_tile(z + 1)) AS tile_monotonic FROM generate_series(0, 30) z;
SELECT bool_and(throttle_cost_features(n) <= throttle_cost_features(n * 10 + 1)) AS features_monotonic
  FROM generate_series(0, 15) g, LATERAL (SELECT (10 ^ g)::bigint AS n) x;

-- Clamped at cost_max, however large the request.
SELECT throttle_cost_radius(1e12) AS clamp_radius, throttle_cost_bbox(-1e300, -1e300, 1e300, 1e300, 3857) AS clamp_bbox,
       throttle_cost_features(9223372036854775807) AS clamp_features, throttle_cost_bbox(-180, -90, 180, 90, 4326) AS world;
SET ogc_throttle.cost_max = 50;
SELECT throttle_cost_radius(1e12) AS clamp_50, throttle_cost_tile(0) AS tile_clamp_50;
RESET ogc_throttle.cost_max;

-- Units: a geographic radius in degrees is priced as equatorial degrees,
-- US survey feet and feet are converted, SRID 0 guesses from the box.
SELECT throttle_cost_radius(0.01, 4326) = throttle_cost_radius(0.01 * 111319.49079327357) AS degrees_to_metres;
SELECT round(throttle_cost_radius(1000, 2263)::numeric, 9) = round(throttle_cost_radius(304.8006096012192)::numeric, 9) AS us_feet;
SELECT round(throttle_cost_radius(1000, 3857)::numeric, 9) = round(throttle_cost_radius(1000)::numeric, 9) AS metres;
SELECT throttle_cost_bbox(0, 0, 0.01, 0.01, 0) = throttle_cost_bbox(0, 0, 0.01, 0.01, 4326) AS srid0_small_is_degrees,
       throttle_cost_bbox(0, 0, 1000, 1000, 0) = throttle_cost_bbox(0, 0, 1000, 1000, 3857) AS srid0_large_is_linear;

-- Geometry and box2d faces agree with the numeric form.
SELECT throttle_cost_bbox(ST_MakeEnvelope(0, 0, 1000, 1000, 3857)) = throttle_cost_bbox(0, 0, 1000, 1000, 3857) AS geom_bbox,
       throttle_cost_bbox(ST_MakeEnvelope(0, 0, 1000, 1000)::box2d, 3857) = throttle_cost_bbox(0, 0, 1000, 1000, 3857) AS box2d_bbox,
       throttle_cost_bbox('SRID=4326;POINT EMPTY'::geometry) AS empty_geom,
       throttle_cost_radius('SRID=4326;POINT(10 50)'::geometry, 0.01) = throttle_cost_radius(0.01, 4326) AS geom_radius;

-- Weights are settings: change one, the price follows.
SET ogc_throttle.radius_fixed_cost = 5;
SET ogc_throttle.density = 0;
SELECT throttle_cost_radius(1e6) AS fixed_only;
RESET ogc_throttle.radius_fixed_cost;
RESET ogc_throttle.density;

-- Every estimator reads settings: STABLE, never IMMUTABLE; not strict (NULL is an error).
SELECT p.oid::regprocedure AS estimator, provolatile, proisstrict, proparallel
  FROM pg_proc p WHERE proname LIKE 'throttle_cost_%' ORDER BY 1::text;

-- Bad input: an error with a SQLSTATE, never a crash or a bogus cost.
SELECT show_error($$SELECT throttle_cost_radius('NaN')$$);
SELECT show_error($$SELECT throttle_cost_radius('Infinity')$$);
SELECT show_error($$SELECT throttle_cost_radius(-1)$$);
SELECT show_error($$SELECT throttle_cost_radius(NULL)$$);
SELECT show_error($$SELECT throttle_cost_radius(-5, 4326)$$);
SELECT show_error($$SELECT throttle_cost_radius('NaN', 4326)$$);
SELECT show_error($$SELECT throttle_cost_radius(5, NULL)$$);
SELECT show_error($$SELECT throttle_cost_radius(5, 0)$$);
SELECT show_error($$SELECT throttle_cost_radius(NULL::geometry, 5)$$);
SELECT show_error($$SELECT throttle_cost_bbox(0, 0, 'NaN', 1, 4326)$$);
SELECT show_error($$SELECT throttle_cost_bbox(0, 0, 'Infinity', 1, 4326)$$);
SELECT show_error($$SELECT throttle_cost_bbox(1, 0, 0, 1, 4326)$$);
SELECT show_error($$SELECT throttle_cost_bbox(0, 0, 1, 1, NULL)$$);
SELECT show_error($$SELECT throttle_cost_bbox(0, 0, 1, 1, 999999)$$);
SELECT show_error($$SELECT throttle_cost_bbox(0, 0, 1, 1, 4326, -1)$$);
SELECT show_error($$SELECT throttle_cost_bbox(NULL::geometry)$$);
SELECT show_error($$SELECT throttle_cost_features(-1)$$);
SELECT show_error($$SELECT throttle_cost_features(NULL)$$);
SELECT show_error($$SELECT throttle_cost_tile(-1)$$);
SELECT show_error($$SELECT throttle_cost_tile(32)$$);
SELECT show_error($$SELECT throttle_cost_tile(NULL)$$);
SELECT show_error($$SELECT throttle_cost_tile(10, -5)$$);
SELECT show_error($$SET ogc_throttle.density = -1$$);
