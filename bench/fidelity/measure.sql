-- Prices and times every query of fq (id, cls, sql) into fres. Server-side:
--   estimate  the hook's price: the "total" row of throttle_explain(sql)
--   features  throttle_features(sql) as JSON, when the function exists (for fitting weights)
--   planner   the planner's total_cost of the top plan node (EXPLAIN (FORMAT JSON))
--   ms        median of 3 "Execution Time"s of EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON),
--             after one warm-up run; the hook is off (ogc_throttle.mode = off) while timing
SET ogc_throttle.mode = 'off';
SET statement_timeout = 0;  -- the DO block below is one statement
DROP TABLE IF EXISTS fres;
CREATE TABLE fres (id int PRIMARY KEY, estimate float8, planner float8, ms float8, runs float8[], features json,
                   charged float8);
DO $$
DECLARE
  q record;
  j json;
  est float8;
  feat json;
  t float8[];
  have_features bool := to_regproc('throttle_features') IS NOT NULL;
BEGIN
  FOR q IN SELECT * FROM fq ORDER BY id LOOP
    SELECT cost INTO est FROM throttle_explain(q.sql) WHERE call LIKE 'total%' LIMIT 1;
    feat := NULL;
    IF have_features THEN
      EXECUTE 'SELECT json_object_agg(class, json_build_array(calls, rows)) FROM throttle_features($1)' INTO feat USING q.sql;
    END IF;
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q.sql INTO j;
    EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ' || q.sql INTO j;  -- warm-up
    t := '{}';
    FOR i IN 1..3 LOOP
      EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ' || q.sql INTO j;
      t := t || (j->0->>'Execution Time')::float8;
    END LOOP;
    INSERT INTO fres (id, estimate, planner, ms, runs, features)
    VALUES (q.id, est, (j->0->'Plan'->>'Total Cost')::float8,
            (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(t) x), t, feat);
    COMMIT;
  END LOOP;
END $$;
