-- Domains (constraints, defaults, NOT NULL), composite and range types, collations, enums.
CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;
CREATE SCHEMA catalog;
CREATE COLLATION catalog.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE COLLATION catalog.c_posix (locale = 'C');
CREATE DOMAIN catalog.year AS integer CONSTRAINT year_check CHECK (VALUE >= 1901 AND VALUE <= 2155);
CREATE DOMAIN catalog.email AS text COLLATE catalog.ci NOT NULL
    CONSTRAINT email_at CHECK (VALUE ~ '@') CONSTRAINT email_len CHECK (length(VALUE) < 320);
CREATE DOMAIN catalog.money_amount AS numeric(12,2) DEFAULT 0 CHECK (VALUE >= 0);
CREATE TYPE catalog.mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE catalog.address AS (street text, city text COLLATE "C", zip varchar(10));
CREATE TYPE catalog.floatrange AS RANGE (SUBTYPE = float8, SUBTYPE_DIFF = float8mi);
CREATE TYPE catalog.price_band AS RANGE (SUBTYPE = numeric);
CREATE TABLE catalog.film (
    id integer PRIMARY KEY,
    title text COLLATE catalog.c_posix NOT NULL,
    release_year catalog.year,
    contact catalog.email,
    price catalog.money_amount,
    mood catalog.mood DEFAULT 'ok',
    shipped_to catalog.address,
    history catalog.address[],
    bands catalog.price_band[],
    window_ catalog.floatrange,
    during tstzrange,
    EXCLUDE USING gist (id WITH =, during WITH &&)
);
CREATE FUNCTION catalog.city_of(a catalog.address) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT a.city $$;
CREATE INDEX film_city ON catalog.film (catalog.city_of(shipped_to));
COMMENT ON DOMAIN catalog.year IS 'A year MySQL would accept';
COMMENT ON CONSTRAINT email_at ON DOMAIN catalog.email IS 'Needs an at sign';
COMMENT ON TYPE catalog.address IS 'Postal address';
COMMENT ON COLUMN catalog.address.zip IS 'Postal code';
COMMENT ON COLLATION catalog.ci IS 'Case-insensitive';
