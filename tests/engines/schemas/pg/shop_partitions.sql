-- A shop: a partitioned orders table (its key over a timestamp) with a generated column,
-- a partial index, a statistics object, a trigger with UPDATE OF and WHEN on a partition,
-- views over views, RLS, a rule, a publication with a column list and a row filter,
-- column grants, comments on view columns, a SQL-standard body, a materialized view.
CREATE SCHEMA shop;
CREATE TABLE shop.customer (
  id integer PRIMARY KEY,
  email varchar(100) NOT NULL,
  tier smallint NOT NULL DEFAULT 1,
  credit numeric(10,2) DEFAULT 0 CHECK (credit >= 0)
);
CREATE TABLE shop.orders (
  id integer NOT NULL,
  customer_id integer NOT NULL REFERENCES shop.customer (id),
  amount numeric(10,2) NOT NULL,
  note varchar(200),
  amount_cents bigint GENERATED ALWAYS AS ((amount * 100)::bigint) STORED,
  placed_at timestamp(3) NOT NULL DEFAULT now()
  , PRIMARY KEY (id, placed_at)
) PARTITION BY RANGE (placed_at);
CREATE TABLE shop.orders_2024 PARTITION OF shop.orders FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE INDEX orders_amount ON shop.orders (amount) WHERE amount > 100;
CREATE STATISTICS shop.orders_st ON customer_id, amount FROM shop.orders;
CREATE VIEW shop.big_orders AS SELECT o.id, o.amount, c.email FROM shop.orders o JOIN shop.customer c ON c.id = o.customer_id WHERE o.amount > 100;
CREATE VIEW shop.big_order_emails AS SELECT DISTINCT email FROM shop.big_orders;
CREATE FUNCTION shop.order_guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER orders_guard BEFORE UPDATE OF amount ON shop.orders_2024 FOR EACH ROW WHEN (OLD.amount IS DISTINCT FROM NEW.amount) EXECUTE FUNCTION shop.order_guard();
ALTER TABLE shop.customer ENABLE ROW LEVEL SECURITY;
CREATE POLICY customer_tier ON shop.customer USING (tier > 0 AND email <> '');
CREATE RULE customer_no_delete AS ON DELETE TO shop.customer WHERE OLD.tier > 5 DO INSTEAD NOTHING;
CREATE PUBLICATION shop_pub FOR TABLE shop.customer (id, email, tier) WHERE (tier > 0);
GRANT SELECT (email, tier) ON shop.customer TO ptah_corpus_reader;
COMMENT ON COLUMN shop.customer.tier IS 'loyalty tier';
COMMENT ON VIEW shop.big_orders IS 'large orders';
COMMENT ON COLUMN shop.big_orders.email IS 'customer email';
GRANT SELECT ON shop.big_orders TO ptah_corpus_reader;
CREATE FUNCTION shop.email_of(cid integer) RETURNS varchar LANGUAGE sql STABLE BEGIN ATOMIC SELECT email FROM shop.customer WHERE id = cid; END;
CREATE MATERIALIZED VIEW shop.customer_totals AS SELECT customer_id, sum(amount) AS total FROM shop.orders GROUP BY customer_id;
CREATE INDEX customer_totals_total ON shop.customer_totals (total DESC);
