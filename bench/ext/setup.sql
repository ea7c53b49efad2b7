-- Objects the benchmark compares against. Run once per cluster, as superuser.
CREATE EXTENSION IF NOT EXISTS ogc_throttle CASCADE;

-- The strongest honest peer in plain SQL: the same GCRA bucket (one number per
-- key, epoch seconds) in an UNLOGGED table, decided by one conditional UPDATE
-- that writes nothing on denial. Keys are created up front so the hot path is
-- a single primary-key update; fillfactor leaves room for HOT updates.
CREATE UNLOGGED TABLE pl_bucket (id text PRIMARY KEY, tat float8 NOT NULL DEFAULT 0) WITH (fillfactor = 50);
INSERT INTO pl_bucket (id) SELECT 'k' || i FROM generate_series(0, 10010) i;

CREATE FUNCTION pl_spend(identity text, cost float8, capacity float8 DEFAULT 1e9, rate float8 DEFAULT 1e9)
RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  now_s float8 := extract(epoch FROM clock_timestamp());
  left_tokens float8;
BEGIN
  UPDATE pl_bucket SET tat = greatest(tat, now_s) + cost / rate
   WHERE id = identity AND greatest(tat, now_s) + cost / rate - now_s <= capacity / rate
  RETURNING capacity - (tat - now_s) * rate INTO left_tokens;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = '53T01', MESSAGE = 'budget exhausted for identity ' || identity;
  END IF;
  RETURN left_tokens;
END $$;

-- The same statement as an SQL function (PostgreSQL plans it per call; kept to
-- show that PL/pgSQL, which caches the plan, is the faster of the two).
CREATE FUNCTION sql_spend(identity text, cost float8, capacity float8 DEFAULT 1e9, rate float8 DEFAULT 1e9)
RETURNS float8 LANGUAGE sql AS $$
  UPDATE pl_bucket SET tat = greatest(tat, extract(epoch FROM clock_timestamp())) + cost / rate
   WHERE id = identity
     AND greatest(tat, extract(epoch FROM clock_timestamp())) + cost / rate - extract(epoch FROM clock_timestamp())
         <= capacity / rate
  RETURNING capacity - (tat - extract(epoch FROM clock_timestamp())) * rate
$$;

-- Seconds one statement takes inside the server (no client round trip).
CREATE FUNCTION bench_seconds(stmt text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE stmt;
  RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;
