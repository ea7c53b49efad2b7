-- Who may spend on whose identity, and who may change budgets.
CREATE ROLE regress_ot_user LOGIN;          -- an ordinary, throttled role
CREATE ROLE regress_ot_app LOGIN;           -- a trusted application role
CREATE ROLE regress_ot_watch LOGIN IN ROLE pg_monitor;
GRANT EXECUTE ON FUNCTION throttle_spend(text, float8), throttle_try_spend(text, float8) TO regress_ot_app;
-- A per-role budget set by an administrator: it applies from the role's next session.
ALTER ROLE regress_ot_user SET ogc_throttle.capacity = 5;
ALTER ROLE regress_ot_user SET ogc_throttle.rate = 0.01;
ALTER ROLE regress_ot_user SET ogc_throttle.cost_max = 5;
SELECT throttle_reset_all() >= 0 AS reset;

\c - regress_ot_user
SHOW ogc_throttle.capacity;
-- Its own bucket: allowed, under its own budget.
SELECT round(throttle_spend(3)::numeric, 2) AS own_left;
SELECT identity, round(tokens::numeric, 2) AS tokens, capacity FROM throttle_peek();
SELECT show_error($$SELECT throttle_spend(3)$$);
SELECT show_error($$SELECT throttle_spend(6)$$);
-- Someone else's bucket, or the admin functions: refused.
SELECT show_error($$SELECT throttle_spend('victim', 1000)$$);
SELECT show_error($$SELECT * FROM throttle_try_spend('victim', 1000)$$);
SELECT show_error($$SELECT * FROM throttle_peek('victim')$$);
SELECT show_error($$SELECT throttle_reset('regress_ot_user')$$);
SELECT show_error($$SELECT throttle_reset_all()$$);
SELECT show_error($$SELECT throttle_stats_reset()$$);
SELECT show_error($$SELECT count(*) FROM throttle_buckets$$);
SELECT show_error($$SELECT count(*) FROM throttle_stats$$);
SELECT show_error($$SELECT count(*) FROM throttle_samples()$$);
SELECT show_error($$SET ogc_throttle.output_row_cost = 0$$);
-- Nor may it raise its own budget or lower the prices.
SELECT show_error($$SET ogc_throttle.capacity = 1000000$$);
SELECT show_error($$SET ogc_throttle.rate = 1000000$$);
SELECT show_error($$SET ogc_throttle.cost_max = 0.01$$);
SELECT show_error($$SET ogc_throttle.density = 0$$);
SELECT show_error($$SELECT set_config('ogc_throttle.capacity', '1000000', false)$$);
SHOW ogc_throttle.capacity;
-- Pricing a request is open to everyone.
SELECT throttle_cost_features(100) AS priced;

\c - regress_ot_app
-- The trusted application spends on behalf of its users.
SELECT round(throttle_spend('end-user-42', 4)::numeric, 2) AS app_left;
SELECT allowed FROM throttle_try_spend('end-user-42', 1);
SELECT show_error($$SELECT throttle_reset('end-user-42')$$);

\c - regress_ot_watch
-- pg_monitor reads the views and peeks, but cannot spend or reset.
SELECT identity, throttled FROM throttle_buckets ORDER BY identity;
SELECT spends >= 3 AS counted FROM throttle_stats;
SELECT identity, tokens BETWEEN 995 AND 1000 AS partly_spent FROM throttle_peek('end-user-42');
SELECT count(*) >= 0 AS reads_samples FROM throttle_samples();
SELECT show_error($$SELECT throttle_spend('end-user-42', 1)$$);
SELECT show_error($$SELECT throttle_reset_all()$$);

\c - postgres
SELECT throttle_reset_all() AS forgotten;
REVOKE EXECUTE ON FUNCTION throttle_spend(text, float8), throttle_try_spend(text, float8) FROM regress_ot_app;
DROP ROLE regress_ot_user;
DROP ROLE regress_ot_app;
DROP ROLE regress_ot_watch;
