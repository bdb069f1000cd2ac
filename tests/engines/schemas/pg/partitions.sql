-- Declarative partitioning: range, list, hash, default partitions, sub-partitions, parent indexes and keys.
CREATE SCHEMA metrics;
CREATE TABLE metrics.measurement (
    city_id integer NOT NULL,
    logdate date NOT NULL,
    peaktemp integer CHECK (peaktemp > -100),
    unitsales integer DEFAULT 0,
    PRIMARY KEY (city_id, logdate)
) PARTITION BY RANGE (logdate);
CREATE TABLE metrics.measurement_y2024 PARTITION OF metrics.measurement
    FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE metrics.measurement_y2025 PARTITION OF metrics.measurement
    FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY LIST (city_id);
CREATE TABLE metrics.measurement_y2025_north PARTITION OF metrics.measurement_y2025 FOR VALUES IN (1, 2, 3);
CREATE TABLE metrics.measurement_y2025_rest PARTITION OF metrics.measurement_y2025 DEFAULT;
CREATE TABLE metrics.measurement_old PARTITION OF metrics.measurement DEFAULT;
CREATE INDEX measurement_sales ON metrics.measurement (unitsales);
CREATE TABLE metrics.city (id integer PRIMARY KEY, name text NOT NULL);
ALTER TABLE metrics.measurement ADD CONSTRAINT measurement_city_fk FOREIGN KEY (city_id) REFERENCES metrics.city(id);
CREATE TABLE metrics.events (
    id bigint NOT NULL,
    tenant integer NOT NULL,
    payload jsonb
) PARTITION BY HASH (tenant);
CREATE TABLE metrics.events_0 PARTITION OF metrics.events FOR VALUES WITH (MODULUS 4, REMAINDER 0);
CREATE TABLE metrics.events_1 PARTITION OF metrics.events FOR VALUES WITH (MODULUS 4, REMAINDER 1);
CREATE TABLE metrics.events_2 PARTITION OF metrics.events FOR VALUES WITH (MODULUS 4, REMAINDER 2);
CREATE TABLE metrics.events_3 PARTITION OF metrics.events FOR VALUES WITH (MODULUS 4, REMAINDER 3);
CREATE UNIQUE INDEX events_pk ON metrics.events (tenant, id);
CREATE INDEX events_payload ON metrics.events USING gin (payload);
COMMENT ON TABLE metrics.measurement_old IS 'Everything before 2024';
