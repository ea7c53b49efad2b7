-- Prices and times every query of fq (id, cls, sql) into fres. Server-side:
--   estimate  the hook's price: the "total" row of throttle_explain(sql)
--   features  throttle_features(sql) as JSON, when the function exists (for fitting weights)
--   planner   the planner's total_cost of the top plan node (EXPLAIN (FORMAT JSON))
--   ms        median of the "Execution Time"s of EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) in
--             fidelity.passes passes (3 when unset; run.sh's PASSES: 7), after one warm-up run;
--             the hook is off (ogc_throttle.mode = off) while timing
-- The timings of a query come from passes over the whole workload, not runs in
-- a row: on the shared machine a burst of other work lasts seconds, and three back-to-back runs
-- all fell in it (a 0.6 ms tile measured 5.2 ms) where the median of three spread passes does not.
-- Each pass takes the queries in another order (id·k mod 1009, a permutation for k < 1009), so that
-- no query follows the same neighbour twice: a 0.2 ms tile run right after a parallel 1 s tile
-- (its workers still exiting on the 2 cores) took 2.2 ms in each of three passes in one order.
SET ogc_throttle.mode = 'off';
SET statement_timeout = 0;  -- the DO blocks below are one statement each
DROP TABLE IF EXISTS fres;
CREATE TABLE fres (id int PRIMARY KEY, estimate float8, planner float8, ms float8, runs float8[], features json,
                   charged float8);
DO $$
DECLARE
  q record;
  j json;
  est float8;
  feat json;
  have_features bool := to_regproc('throttle_features') IS NOT NULL;
BEGIN
  FOR q IN SELECT * FROM fq ORDER BY id LOOP
    SELECT cost INTO est FROM throttle_explain(q.sql) WHERE call LIKE 'total%' LIMIT 1;
    feat := NULL;
    IF have_features THEN
      EXECUTE 'SELECT json_object_agg(class, json_build_array(calls, rows)) FROM throttle_features($1)' INTO feat USING q.sql;
    END IF;
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q.sql INTO j;
    INSERT INTO fres (id, estimate, planner, runs, features)
    VALUES (q.id, est, (j->0->'Plan'->>'Total Cost')::float8, '{}', feat);
    EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ' || q.sql INTO j;  -- warm-up
    COMMIT;
  END LOOP;
END $$;
DO $$
DECLARE
  q record;
  j json;
BEGIN
  FOR pass IN 1..coalesce(current_setting('fidelity.passes', true), '3')::int LOOP
    FOR q IN SELECT * FROM fq ORDER BY (id * (ARRAY[389, 577, 811, 239, 937, 113, 661])[pass]) % 1009 LOOP
      EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ' || q.sql INTO j;
      UPDATE fres SET runs = runs || (j->0->>'Execution Time')::float8 WHERE id = q.id;
      COMMIT;
    END LOOP;
  END LOOP;
  UPDATE fres SET ms = (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(runs) x);
END $$;
