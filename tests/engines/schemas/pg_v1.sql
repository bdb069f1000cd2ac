CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA app;
CREATE TYPE app.order_status AS ENUM ('new', 'paid', 'shipped');
CREATE SEQUENCE app.invoice_no START 1000 INCREMENT 1;
CREATE TABLE app.customers (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email text NOT NULL UNIQUE,
  name varchar(200) NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT email_has_at CHECK (position('@' in email) > 1)
);
COMMENT ON TABLE app.customers IS 'People who buy';
COMMENT ON COLUMN app.customers.email IS 'Login';
CREATE TABLE app.orders (
  id serial PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES app.customers(id) ON DELETE CASCADE,
  status app.order_status NOT NULL DEFAULT 'new',
  total numeric(12,2) NOT NULL CHECK (total >= 0),
  invoice bigint DEFAULT nextval('app.invoice_no'),
  total_cents bigint GENERATED ALWAYS AS ((total * 100)::bigint) STORED,
  note text COLLATE "C"
);
CREATE INDEX orders_customer ON app.orders (customer_id);
CREATE INDEX orders_open ON app.orders (customer_id) WHERE status <> 'shipped';
CREATE INDEX customers_lower_email ON app.customers (lower(email));
CREATE VIEW app.open_orders AS SELECT o.id, c.email FROM app.orders o JOIN app.customers c ON c.id = o.customer_id WHERE o.status <> 'shipped';
CREATE VIEW app.open_count AS SELECT count(*) AS n FROM app.open_orders;
CREATE TABLE public.audit (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), at timestamptz);
