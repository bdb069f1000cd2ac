"""MariaDB/MySQL through PyMySQL: identity, SHOW CREATE TABLE inspection, diff."""
