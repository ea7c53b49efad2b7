-- Every suite runs in the same database: create the extensions once.
CREATE EXTENSION postgis;
CREATE EXTENSION ogc_throttle;
SELECT extname, extversion FROM pg_extension WHERE extname = 'ogc_throttle';

-- Shows SQLSTATE, message, detail and hint of a statement's error (or 'no error').
CREATE FUNCTION show_error(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text; hin text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hin = PG_EXCEPTION_HINT;
    RETURN st || ' ' || msg || coalesce(' | DETAIL: ' || nullif(det, ''), '')
              || coalesce(' | HINT: ' || nullif(hin, ''), '');
END $$;
GRANT EXECUTE ON FUNCTION show_error(text) TO PUBLIC;
