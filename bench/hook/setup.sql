-- Same data in both clusters: PostGIS and 200 000 points in Web Mercator over
-- roughly 5-15 E, 45-55 N (one point per ~10 km², ~3 km apart), GiST-indexed.
-- pgbench -i provides the select-only tables. Deterministic (setseed) so both
-- clusters hold the same rows.
CREATE EXTENSION IF NOT EXISTS postgis;
SELECT setseed(0.42);
CREATE TABLE pts (id integer PRIMARY KEY, kind integer NOT NULL, geom geometry(Point, 3857) NOT NULL);
INSERT INTO pts
SELECT i, i % 7,
       ST_SetSRID(ST_MakePoint(556597 + random() * 1113195, 5621521 + random() * 1740345), 3857)
FROM generate_series(1, :npoints) i;
CREATE INDEX pts_geom ON pts USING gist (geom);
-- A sample as large as the table: ANALYZE then reads every row, so both
-- clusters get the same statistics and the same plans (a random 30 000-row
-- sample made A's and B's selectivities, and at times their plans, differ).
ALTER TABLE pts ALTER COLUMN geom SET STATISTICS 10000;
VACUUM ANALYZE pts;
