-- The buckets and stats views.
SET ogc_throttle.capacity = 10;
SET ogc_throttle.rate = 0.01;
SET ogc_throttle.cost_max = 10;
SELECT throttle_reset_all() >= 0 AS reset;
SELECT throttle_stats_reset();

SELECT round(throttle_spend('v1', 4)::numeric) AS a, round(throttle_spend('v1', 4)::numeric) AS b,
       round(throttle_spend('v2', 1)::numeric) AS c;
SELECT show_error($$SELECT throttle_spend('v1', 4)$$) LIKE '53T01%' AS refused;
SELECT show_error($$SELECT throttle_spend('v2', 11)$$) LIKE '54T01%' AS never_fits;
SELECT allowed FROM throttle_try_spend('v3', 2.5);

SELECT identity, round(tokens::numeric, 1) AS tokens, capacity, rate, throttled,
       last_request BETWEEN now() - interval '1 minute' AND clock_timestamp() AS recent,
       full_at > clock_timestamp() AS filling
  FROM throttle_buckets ORDER BY identity;

SELECT spends, refusals, never_fits, cost_charged, identities, max_identities,
       evicted_full, evicted_lossy, stats_reset <= clock_timestamp() AS has_reset_time
  FROM throttle_stats;

-- Column types, as documented.
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'throttle_buckets'::regclass AND attnum > 0 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod)
  FROM pg_attribute WHERE attrelid = 'throttle_stats'::regclass AND attnum > 0 ORDER BY attnum;

-- Counters reset; buckets do not.
SELECT throttle_stats_reset();
SELECT spends, refusals, never_fits, cost_charged, identities FROM throttle_stats;
SELECT throttle_reset_all() AS forgotten;
