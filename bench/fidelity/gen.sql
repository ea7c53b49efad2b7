-- Skewed point and polygon layers for the fidelity benchmark (psql variable
-- :npoints, default set by run.sh). Deterministic: setseed before each layer.
--   fcity   "cities": Zipf-sized clusters of varied spread (dense cores, wide suburbs)
--   fpts    points in 4326: 90% in cities (Gaussian around the centre), 10% sparse
--           background over the world's land-ish band; GiST on geom and on geog
--   fpoly   polygons: a grid of districts around each city (cell size follows the
--           city's spread), plus coarse regional squares
CREATE EXTENSION IF NOT EXISTS postgis;
DROP TABLE IF EXISTS fcity, fpts, fpoly, fkinds;

SELECT setseed(0.42);
CREATE TABLE fcity AS
SELECT c AS id,
       -10 + 50 * random() AS lon,
       35 + 25 * random() AS lat,
       -- spread in degrees: 0.005 (a dense core) .. 0.4 (a region)
       exp(ln(0.005) + random() * (ln(0.4) - ln(0.005))) AS sigma,
       1.0 / power(c, 1.1) AS w
FROM generate_series(1, 60) c;
ALTER TABLE fcity ADD COLUMN n int, ADD COLUMN center geometry(Point, 4326);
UPDATE fcity SET n = round(0.9 * :npoints * w / (SELECT sum(w) FROM fcity)),
                 center = ST_SetSRID(ST_MakePoint(lon, lat), 4326);

SELECT setseed(0.17);
CREATE TABLE fpts (id bigserial PRIMARY KEY, kind int NOT NULL, geom geometry(Point, 4326) NOT NULL,
                   geog geography(Point, 4326));
INSERT INTO fpts (kind, geom)
SELECT kind, ST_SetSRID(ST_MakePoint(greatest(-179.9, least(179.9, lon + dx)), greatest(-85, least(85, lat + dy))), 4326)
FROM (SELECT (random() * 9)::int AS kind, c.lon, c.lat,
             c.sigma / cos(radians(c.lat)) * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS dx,
             c.sigma * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS dy
      FROM fcity c, LATERAL generate_series(1, c.n) g) s;
INSERT INTO fpts (kind, geom)
SELECT (random() * 9)::int, ST_SetSRID(ST_MakePoint(-180 + 360 * random(), -60 + 130 * random()), 4326)
FROM generate_series(1, (0.1 * :npoints)::int);
UPDATE fpts SET geog = geom::geography;
ALTER TABLE fpts ALTER COLUMN geog SET NOT NULL;
CREATE INDEX fpts_geom ON fpts USING gist (geom);
CREATE INDEX fpts_geog ON fpts USING gist (geog);

CREATE TABLE fkinds AS SELECT k AS kind, 'kind ' || k AS label FROM generate_series(0, 9) k;

SELECT setseed(0.23);
CREATE TABLE fpoly (id serial PRIMARY KEY, city int, geom geometry(Polygon, 4326) NOT NULL);
-- districts: a 12x12 grid of cells of 0.5 sigma around each city
INSERT INTO fpoly (city, geom)
SELECT c.id, ST_MakeEnvelope(c.lon + (i - 6) * 0.5 * c.sigma, c.lat + (j - 6) * 0.5 * c.sigma,
                             c.lon + (i - 5) * 0.5 * c.sigma, c.lat + (j - 5) * 0.5 * c.sigma, 4326)
FROM fcity c, generate_series(0, 11) i, generate_series(0, 11) j;
-- regions: 2-degree squares over the cities' band
INSERT INTO fpoly (city, geom)
SELECT NULL, ST_MakeEnvelope(x, y, x + 2, y + 2, 4326)
FROM generate_series(-12, 40, 2) x, generate_series(34, 60, 2) y;
CREATE INDEX fpoly_geom ON fpoly USING gist (geom);
VACUUM ANALYZE fcity;
VACUUM ANALYZE fkinds;
VACUUM ANALYZE fpts;
VACUUM ANALYZE fpoly;
