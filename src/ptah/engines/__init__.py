"""PostgreSQL, MariaDB/MySQL and SQLite: identity, inspect, plan, apply. Never imports the operator."""
