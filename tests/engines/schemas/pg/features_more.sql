-- What the other files do not have: an inheriting child's own default and NOT NULL on
-- columns its parents give it (two parents, a grandchild), a partition's own NOT NULL,
-- a domain's NOT VALID check, grants to several roles in other than name order (tables,
-- columns, schemas, functions, identity sequences), sub-partitions of several levels under
-- partitioned indexes and keys, and index options of every access method.
CREATE SCHEMA more;
GRANT USAGE ON SCHEMA more TO ptah_corpus_writer;
GRANT USAGE ON SCHEMA more TO ptah_corpus_reader;
CREATE TABLE more.named (id integer NOT NULL DEFAULT 1, label text CHECK (label <> ''));
CREATE TABLE more.stamped (id integer NOT NULL, at timestamptz);
CREATE TABLE more.thing (kind integer, id integer DEFAULT 2) INHERITS (more.named, more.stamped);
ALTER TABLE more.thing ALTER COLUMN label SET DEFAULT 'thing';
ALTER TABLE more.thing ALTER COLUMN at SET NOT NULL;
ALTER TABLE more.thing ALTER COLUMN at SET DEFAULT now();
CREATE TABLE more.sub_thing () INHERITS (more.thing);
ALTER TABLE more.sub_thing ADD CONSTRAINT sub_thing_kind CHECK (kind > 0);
ALTER TABLE more.sub_thing ALTER COLUMN id DROP NOT NULL;
CREATE DOMAIN more.code AS text COLLATE "C" DEFAULT 'x' NOT NULL
    CONSTRAINT code_set CHECK (VALUE <> '') CONSTRAINT code_len CHECK (length(VALUE) < 10);
ALTER DOMAIN more.code ADD CONSTRAINT code_not_y CHECK (VALUE <> 'y') NOT VALID;
COMMENT ON CONSTRAINT code_not_y ON DOMAIN more.code IS 'Not checked against old rows';
CREATE TABLE more.coded (c more.code, cs more.code[]);
CREATE TABLE more.reading (
    id bigint GENERATED ALWAYS AS IDENTITY,
    at date NOT NULL,
    sensor integer,
    value numeric,
    doubled numeric GENERATED ALWAYS AS (value * 2) STORED,
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE TABLE more.reading_2024 PARTITION OF more.reading
    FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY HASH (id);
CREATE TABLE more.reading_2024_0 PARTITION OF more.reading_2024
    FOR VALUES WITH (MODULUS 2, REMAINDER 0) PARTITION BY RANGE (at);
CREATE TABLE more.reading_2024_0_h1 PARTITION OF more.reading_2024_0
    FOR VALUES FROM (MINVALUE) TO ('2024-07-01');
CREATE TABLE more.reading_2024_0_h2 PARTITION OF more.reading_2024_0
    FOR VALUES FROM ('2024-07-01') TO (MAXVALUE);
CREATE TABLE more.reading_2024_1 PARTITION OF more.reading_2024
    FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE more.reading_old PARTITION OF more.reading (sensor DEFAULT 0) DEFAULT;
ALTER TABLE more.reading_old ALTER COLUMN sensor SET NOT NULL;
CREATE INDEX reading_sensor ON more.reading (sensor DESC NULLS FIRST) INCLUDE (value);
CREATE TABLE more.alert (id bigint, at date, FOREIGN KEY (id, at) REFERENCES more.reading
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE more.template (m integer CHECK (m > 0), note text DEFAULT 'none');
CREATE TABLE more.copied (n integer GENERATED ALWAYS AS IDENTITY, LIKE more.template INCLUDING ALL);
GRANT USAGE ON SEQUENCE more.copied_n_seq TO ptah_corpus_writer;
GRANT USAGE ON SEQUENCE more.copied_n_seq TO ptah_corpus_reader;
CREATE TABLE more.doc (id integer, body jsonb, during tstzrange, slug text, at timestamptz);
CREATE INDEX doc_id ON more.doc (id) WITH (deduplicate_items = off, fillfactor = 70);
CREATE INDEX doc_body ON more.doc USING gin (body) WITH (fastupdate = off);
CREATE INDEX doc_at ON more.doc USING brin (at timestamptz_minmax_multi_ops (values_per_range = 16));
CREATE INDEX doc_during ON more.doc USING gist (during) WITH (buffering = on);
CREATE INDEX doc_key ON more.doc ((body ->> 'k'), (id % 10)) WHERE body ? 'k';
CREATE INDEX doc_slug ON more.doc (slug COLLATE "C" DESC NULLS FIRST, id NULLS FIRST);
GRANT SELECT ON more.doc TO ptah_corpus_writer;
GRANT SELECT ON more.doc TO PUBLIC;
GRANT SELECT ON more.doc TO ptah_corpus_reader;
GRANT SELECT (id), UPDATE (slug) ON more.doc TO ptah_corpus_writer;
GRANT SELECT (id) ON more.doc TO ptah_corpus_reader;
CREATE FUNCTION more.touch(n integer) RETURNS integer LANGUAGE sql IMMUTABLE RETURN n + 1;
REVOKE ALL ON FUNCTION more.touch(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION more.touch(integer) TO ptah_corpus_writer;
GRANT EXECUTE ON FUNCTION more.touch(integer) TO ptah_corpus_reader;
