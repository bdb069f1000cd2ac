-- Storage and statistics settings, row-level security and policies, privileges and default privileges.
CREATE SCHEMA app;
CREATE UNLOGGED TABLE app.session_cache (key text PRIMARY KEY, value bytea) WITH (fillfactor = 70, autovacuum_enabled = false);
CREATE TABLE app.account (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id integer NOT NULL,
    owner_name text NOT NULL,
    bio text COMPRESSION pglz,
    avatar bytea,
    score integer
) WITH (fillfactor = 90);
ALTER TABLE app.account ALTER COLUMN avatar SET STORAGE EXTERNAL;
ALTER TABLE app.account ALTER COLUMN tenant_id SET STATISTICS 500;
CREATE INDEX account_tenant ON app.account (tenant_id) WITH (fillfactor = 80);
CREATE INDEX account_expr ON app.account ((score * 2));
ALTER INDEX app.account_expr ALTER COLUMN 1 SET STATISTICS 300;
ALTER TABLE app.account REPLICA IDENTITY FULL;
ALTER TABLE app.account ENABLE ROW LEVEL SECURITY;
ALTER TABLE app.account FORCE ROW LEVEL SECURITY;
CREATE POLICY account_tenant ON app.account USING (tenant_id = current_setting('app.tenant')::integer);
CREATE POLICY account_insert ON app.account AS RESTRICTIVE FOR INSERT TO ptah_corpus_writer, ptah_corpus_reader WITH CHECK (score IS NULL OR score >= 0);
CREATE TABLE app.audit (id bigserial PRIMARY KEY, at timestamptz DEFAULT now(), what text);
ALTER TABLE app.audit REPLICA IDENTITY USING INDEX audit_pkey;
ALTER TABLE app.audit CLUSTER ON audit_pkey;
CREATE SEQUENCE app.ticket_seq AS integer START 100 CACHE 5;
CREATE TABLE app.ticket (no integer NOT NULL DEFAULT nextval('app.ticket_seq'), title text);
ALTER SEQUENCE app.ticket_seq OWNED BY app.ticket.no;
CREATE VIEW app.account_public AS SELECT id, owner_name FROM app.account;
CREATE MATERIALIZED VIEW app.account_stats AS SELECT tenant_id, count(*) AS n FROM app.account GROUP BY tenant_id;
CREATE UNIQUE INDEX account_stats_tenant ON app.account_stats (tenant_id);
COMMENT ON MATERIALIZED VIEW app.account_stats IS 'Per tenant';
COMMENT ON INDEX app.account_stats_tenant IS 'For REFRESH CONCURRENTLY';
COMMENT ON POLICY account_tenant ON app.account IS 'Tenant isolation';
REVOKE ALL ON SCHEMA app FROM PUBLIC;
GRANT USAGE ON SCHEMA app TO PUBLIC;
GRANT SELECT ON app.account_public TO PUBLIC;
GRANT SELECT, INSERT ON TABLE app.audit TO PUBLIC;
GRANT SELECT (id, owner_name), UPDATE (owner_name) ON app.account TO PUBLIC;
GRANT USAGE, SELECT ON SEQUENCE app.ticket_seq TO PUBLIC;
GRANT SELECT ON app.account_stats TO ptah_corpus_reader WITH GRANT OPTION;
GRANT ALL ON app.ticket TO ptah_corpus_writer;
ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO ptah_corpus_reader;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER TABLE app.account OWNER TO role_this_server_lacks;
