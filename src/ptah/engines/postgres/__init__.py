"""PostgreSQL: psycopg 3 connection, identity, set-based catalog inspection, diff."""
