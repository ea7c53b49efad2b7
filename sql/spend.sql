-- Burst, refusal, refill, try_spend, peek and reset.
-- A slow refill (0.01/s) keeps printed balances stable while the test runs.
-- cost_max (500) above this capacity draws a warning, once per session.
SET ogc_throttle.capacity = 10;
SET ogc_throttle.rate = 0.01;
SELECT throttle_reset_all() >= 0 AS reset;

-- The burst: exactly the capacity is admitted, then refusal.
SELECT round(throttle_spend('alice', 4)::numeric, 2) AS left1;
SELECT round(throttle_spend('alice', 4)::numeric, 2) AS left2;
SELECT show_error($$SELECT throttle_spend('alice', 4)$$);
-- A refused spend changes nothing: 2 tokens are still there and fit.
SELECT round(throttle_spend('alice', 2)::numeric, 2) AS left3;
SELECT show_error($$SELECT throttle_spend('alice', 0.5)$$);

-- Cost above capacity never fits and says not to retry.
SELECT show_error($$SELECT throttle_spend('bob', 10.5)$$);
-- Exactly the capacity fits once.
SELECT round(throttle_spend('bob', 10)::numeric, 2) AS bob_left;
-- Zero cost is always allowed, even on an empty bucket.
SELECT round(throttle_spend('bob', 0)::numeric, 2) AS zero_cost;

-- The non-raising form.
SELECT allowed, round(remaining::numeric, 2) AS remaining, retry_after_s IS NOT NULL AS can_retry,
       round(retry_after_s::numeric) AS retry_s, round(reset_after_s::numeric) AS reset_s
  FROM throttle_try_spend('carol', 6);
SELECT allowed, round(remaining::numeric, 2) AS remaining, round(retry_after_s::numeric) AS retry_s
  FROM throttle_try_spend('carol', 6);
SELECT allowed, retry_after_s IS NULL AS never_fits FROM throttle_try_spend('carol', 11);

-- Refill after waiting: 10 per second, emptied, then half a second later 4..7 tokens.
SET ogc_throttle.rate = 10;
SELECT round(throttle_spend('dave', 10)::numeric) AS emptied;
SELECT pg_sleep(0.5);
SELECT tokens BETWEEN 4 AND 7 AS refilled, throttled FROM throttle_peek('dave');
SET ogc_throttle.rate = 0.01;

-- peek: an unknown identity is a full bucket of the caller's budget, not stored.
SELECT identity, tokens, capacity, throttled, last_request IS NULL AS never_seen FROM throttle_peek('nobody');
SELECT count(*) AS stored FROM throttle_buckets WHERE identity = 'nobody';
SELECT identity, tokens < 0.1 AS nearly_empty, throttled FROM throttle_peek('alice');

-- reset forgets one bucket; reset_all forgets all.
SELECT throttle_reset('alice') AS existed, throttle_reset('alice') AS existed_again;
SELECT round(tokens::numeric, 2) AS tokens_after_reset FROM throttle_peek('alice');
SELECT throttle_reset_all() AS forgotten;
SELECT count(*) AS left_in_table FROM throttle_buckets;

-- Spending is not transactional: a rolled-back transaction keeps its charge
-- (the work it priced may already have run).
BEGIN;
SELECT round(throttle_spend('erin', 3)::numeric, 2) AS in_tx;
ROLLBACK;
SELECT round(tokens::numeric, 2) AS after_rollback FROM throttle_peek('erin');

-- Identities: 63 bytes fit, 64 do not (no silent truncation), empty is refused.
SELECT round(throttle_spend(repeat('x', 63), 1)::numeric, 2) AS long_ok;
SELECT show_error($$SELECT throttle_spend(repeat('x', 64), 1)$$);
SELECT show_error($$SELECT throttle_spend('', 1)$$);
SELECT round(throttle_spend('ÅØ🙂', 1)::numeric, 2) AS multibyte_ok;

-- Bad costs and NULLs are errors, never a free pass.
SELECT show_error($$SELECT throttle_spend('frank', NULL)$$);
SELECT show_error($$SELECT throttle_spend(NULL, 1)$$);
SELECT show_error($$SELECT throttle_spend('frank', 'NaN')$$);
SELECT show_error($$SELECT throttle_spend('frank', 'Infinity')$$);
SELECT show_error($$SELECT throttle_spend('frank', '-Infinity')$$);
SELECT show_error($$SELECT throttle_spend('frank', -1)$$);
SELECT show_error($$SELECT * FROM throttle_try_spend('frank', 'NaN')$$);
SELECT show_error($$SELECT * FROM throttle_try_spend('frank', NULL)$$);
SELECT show_error($$SELECT throttle_peek(NULL)$$);
SELECT show_error($$SELECT throttle_reset(NULL)$$);
SELECT count(*) AS frank_untouched FROM throttle_buckets WHERE identity = 'frank';

-- Budgets outside the allowed range are refused by the GUC itself.
SELECT show_error($$SET ogc_throttle.capacity = 0$$);
SELECT show_error($$SET ogc_throttle.rate = -1$$);
RESET ogc_throttle.capacity;
RESET ogc_throttle.rate;

-- A backend remembers the bucket it spends from: after a reset (one bucket, or all) its next spend
-- lands in the bucket the views show, not in the forgotten entry.
SET ogc_throttle.capacity = 100;
SET ogc_throttle.rate = 0.01;
SELECT round(throttle_spend('gina', 30)::numeric, 2) AS gina_left;
SELECT throttle_reset('gina') AS existed;
SELECT round(throttle_spend('gina', 10)::numeric, 2) AS gina_left;
SELECT round(tokens::numeric) AS tokens_after_reset_and_spend FROM throttle_peek('gina');
SELECT throttle_reset_all() > 0 AS forgotten;
SELECT round(throttle_spend('gina', 20)::numeric, 2) AS gina_left;
SELECT round(tokens::numeric) AS tokens_after_reset_all_and_spend FROM throttle_peek('gina');
RESET ogc_throttle.capacity;
RESET ogc_throttle.rate;
