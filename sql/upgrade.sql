-- ALTER EXTENSION ogc_throttle UPDATE from 0.1, in a database of its own:
-- every 0.1 object survives, the new ones appear, and buckets (shared memory)
-- are untouched.
CREATE DATABASE ot_upgrade;
\c ot_upgrade
SET client_min_messages = warning;
CREATE EXTENSION postgis;
CREATE EXTENSION ogc_throttle VERSION '0.1';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle';
SET ogc_throttle.rate = 0.01;  -- no visible refill while the test runs
SELECT throttle_reset('upgrade-probe');
SELECT round(throttle_spend('upgrade-probe', 123)::numeric) AS left_before;
-- The 0.2 library reads the 0.1 row shapes.
SELECT count(*) AS stats_columns FROM json_object_keys((SELECT row_to_json(s) FROM throttle_stats_row() s));
SELECT count(*) AS identity_stats_columns
  FROM json_object_keys((SELECT row_to_json(s) FROM throttle_identity_stats_all() s LIMIT 1));
ALTER EXTENSION ogc_throttle UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle';
SELECT round(tokens::numeric) AS left_after FROM throttle_peek('upgrade-probe');
SELECT column_name FROM information_schema.columns WHERE table_name = 'throttle_stats' AND ordinal_position > 13 ORDER BY ordinal_position;
SELECT column_name FROM information_schema.columns WHERE table_name = 'throttle_identity_stats' AND ordinal_position > 7;
SELECT count(*) AS stats_columns FROM json_object_keys((SELECT row_to_json(s) FROM throttle_stats_row() s));
SELECT count(*) AS last_statement_columns FROM json_object_keys((SELECT row_to_json(s) FROM throttle_last_statement() s));
-- Privileges are those of a fresh 0.2 install.
SELECT has_table_privilege('pg_monitor', 'throttle_stats', 'SELECT') AS monitor_reads,
       has_table_privilege('public', 'throttle_stats', 'SELECT') AS public_reads;
-- Nothing of the extension is left out of it, and nothing dangles.
SELECT count(*) AS loose_objects FROM pg_proc p WHERE p.proname LIKE 'throttle%'
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e');
SELECT throttle_reset('upgrade-probe');
\c regression
DROP DATABASE ot_upgrade;
