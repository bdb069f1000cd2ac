-- Shapes of application schemas the other files do not have: extensions in their own
-- schema and their operator classes, recursive and security_invoker views, composites,
-- multiranges, SP-GiST, hash and default partitions with sub-partitions and a key onto a
-- partitioned table, triggers with transition tables and column lists, NOT VALID keys,
-- rules with ON CONFLICT, the public schema's usual REVOKE, and grants of every kind.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
COMMENT ON SCHEMA public IS 'application schema';
CREATE SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS citext WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS "uuid-ossp" WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS hstore WITH SCHEMA extensions;
CREATE SCHEMA app;
CREATE TYPE app."Status" AS ENUM ('new', 'in progress', 'it''s done');
CREATE TYPE app.point3 AS (x double precision, y double precision, z double precision);
CREATE DOMAIN app.tags AS text[] CHECK (cardinality(VALUE) <= 10);
CREATE DOMAIN app.email AS extensions.citext CHECK (VALUE OPERATOR(extensions.~~) '%@%');
CREATE SEQUENCE app.shared_ids AS bigint START WITH 1000 INCREMENT BY 7 MINVALUE 1000 CACHE 10;
CREATE TABLE app.users (
    id uuid DEFAULT extensions.uuid_generate_v4() PRIMARY KEY,
    email app.email NOT NULL UNIQUE,
    name text COLLATE "C" NOT NULL,
    tags app.tags DEFAULT '{}',
    attrs extensions.hstore,
    status app."Status" NOT NULL DEFAULT 'new',
    legacy_id bigint NOT NULL DEFAULT nextval('app.shared_ids'),
    manager uuid REFERENCES app.users (id) DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL DEFAULT now(),
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple', name)) STORED
);
ALTER TABLE app.users ADD CONSTRAINT users_name_len CHECK (char_length(name) < 200) NOT VALID;
CREATE INDEX users_name_trgm ON app.users USING gin (name extensions.gin_trgm_ops);
CREATE INDEX users_name_pattern ON app.users (lower(name) text_pattern_ops DESC NULLS FIRST)
    WHERE status <> 'it''s done';
CREATE INDEX users_search ON app.users USING gin (search);
CREATE INDEX users_attrs ON app.users USING gist (attrs extensions.gist_hstore_ops (siglen = 32));
CREATE TABLE app.locations (p app.point3, at app.point3[]);
CREATE TABLE app.slots (id integer PRIMARY KEY, during tsmultirange, area box);
CREATE INDEX slots_area ON app.slots USING spgist (area);
CREATE TABLE app.events (
    id bigint GENERATED ALWAYS AS IDENTITY,
    tenant integer NOT NULL,
    at date NOT NULL,
    payload jsonb,
    PRIMARY KEY (id, tenant, at)
) PARTITION BY LIST (tenant);
CREATE TABLE app.events_t1 PARTITION OF app.events FOR VALUES IN (1) PARTITION BY RANGE (at);
CREATE TABLE app.events_t1_2024 PARTITION OF app.events_t1 FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE app.events_t1_rest PARTITION OF app.events_t1 DEFAULT;
CREATE TABLE app.events_other PARTITION OF app.events DEFAULT;
CREATE INDEX events_payload ON app.events USING gin (payload jsonb_path_ops);
CREATE TABLE app.buckets (id integer NOT NULL, v text, PRIMARY KEY (id)) PARTITION BY HASH (id);
CREATE TABLE app.buckets_0 PARTITION OF app.buckets FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE app.buckets_1 PARTITION OF app.buckets FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE app.bucket_refs (
    id integer PRIMARY KEY,
    bucket integer
);
ALTER TABLE app.bucket_refs ADD CONSTRAINT bucket_refs_bucket_fkey FOREIGN KEY (bucket)
    REFERENCES app.buckets (id) ON DELETE CASCADE NOT VALID;
CREATE TABLE app.audit (at timestamptz DEFAULT now(), op text, n integer);
CREATE FUNCTION app.audit_rows() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, app AS $$
BEGIN
    INSERT INTO app.audit (op, n) SELECT TG_OP, count(*) FROM new_rows;
    RETURN NULL;
END $$;
CREATE TRIGGER users_audit AFTER INSERT ON app.users REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION app.audit_rows();
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER users_touch BEFORE UPDATE OF name, email ON app.users FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION app.touch();
ALTER TABLE app.users ENABLE ALWAYS TRIGGER users_touch;
CREATE FUNCTION app.running_total(bigint) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
    STRICT COST 1 AS 'SELECT $1';
CREATE FUNCTION app.split(t text, OUT head text, OUT rest text) LANGUAGE sql IMMUTABLE
    AS $$ SELECT split_part(t, ' ', 1), substr(t, strpos(t, ' ') + 1) $$;
CREATE FUNCTION app.user_ids() RETURNS SETOF uuid LANGUAGE sql STABLE ROWS 100
    AS $$ SELECT id FROM app.users $$;
CREATE FUNCTION app.kinds() RETURNS TABLE (k text, n bigint) LANGUAGE sql STABLE
    BEGIN ATOMIC SELECT status::text, count(*) FROM app.users GROUP BY status; END;
CREATE VIEW app.org_chart AS
    WITH RECURSIVE chain (id, manager, depth) AS (
        SELECT id, manager, 0 FROM app.users WHERE manager IS NULL
        UNION ALL
        SELECT u.id, u.manager, c.depth + 1 FROM app.users u JOIN chain c ON u.manager = c.id
    ) SELECT id, manager, depth FROM chain;
CREATE VIEW app.my_users WITH (security_invoker = true) AS
    SELECT id, name FROM app.users WHERE status = 'new' ORDER BY name LIMIT 100;
CREATE TABLE app.counters (k text PRIMARY KEY, n integer NOT NULL DEFAULT 0);
CREATE RULE counters_upsert AS ON INSERT TO app.counters WHERE NEW.n < 0 DO INSTEAD NOTHING;
CREATE VIEW app.counter_view AS SELECT k, n FROM app.counters;
CREATE RULE counter_view_insert AS ON INSERT TO app.counter_view DO INSTEAD
    INSERT INTO app.counters (k, n) VALUES (NEW.k, NEW.n)
    ON CONFLICT (k) DO UPDATE SET n = app.counters.n + EXCLUDED.n;
CREATE MATERIALIZED VIEW app.status_counts AS SELECT status, count(*) AS n FROM app.users
    GROUP BY status WITH NO DATA;
CREATE UNIQUE INDEX status_counts_status ON app.status_counts (status);
COMMENT ON TRIGGER users_touch ON app.users IS 'keeps updated_at';
COMMENT ON RULE counters_upsert ON app.counters IS 'negative counts are ignored';
COMMENT ON COLUMN app.status_counts.n IS 'users in that status';
COMMENT ON TYPE app."Status" IS 'Lifecycle';
COMMENT ON COLUMN app.point3.z IS 'height';
COMMENT ON FUNCTION app.split(text) IS 'head and rest';
GRANT USAGE ON SCHEMA app TO ptah_corpus_reader;
GRANT CREATE ON SCHEMA app TO ptah_corpus_writer WITH GRANT OPTION;
GRANT SELECT ON ALL TABLES IN SCHEMA app TO ptah_corpus_reader;
GRANT INSERT, UPDATE (name, tags) ON app.users TO ptah_corpus_writer;
GRANT EXECUTE ON FUNCTION app.split(text) TO ptah_corpus_reader;
REVOKE EXECUTE ON FUNCTION app.audit_rows() FROM PUBLIC;
GRANT USAGE ON TYPE app."Status" TO ptah_corpus_writer;
REVOKE USAGE ON DOMAIN app.tags FROM PUBLIC;
GRANT USAGE, UPDATE ON SEQUENCE app.shared_ids TO ptah_corpus_writer;
ALTER DEFAULT PRIVILEGES FOR ROLE CURRENT_USER IN SCHEMA app GRANT SELECT ON SEQUENCES TO ptah_corpus_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT USAGE ON TYPES TO ptah_corpus_writer;
