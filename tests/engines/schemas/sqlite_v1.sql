CREATE TABLE customers (
  id INTEGER PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL DEFAULT '',
  CHECK (instr(email, '@') > 1)
);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  customer_id INTEGER NOT NULL REFERENCES customers(id) ON DELETE CASCADE,
  total NUMERIC NOT NULL CHECK (total >= 0),
  total_cents INTEGER GENERATED ALWAYS AS (CAST(total * 100 AS INTEGER)) STORED,
  status TEXT NOT NULL DEFAULT 'new'
);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE INDEX orders_open ON orders (customer_id) WHERE status <> 'shipped';
CREATE VIEW open_orders AS SELECT o.id, c.email FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status <> 'shipped';
CREATE TRIGGER orders_no_negative BEFORE UPDATE ON orders WHEN NEW.total < 0 BEGIN SELECT RAISE(ABORT, 'negative'); END;
