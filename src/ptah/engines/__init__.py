"""PostgreSQL, MariaDB/MySQL and SQLite: identity, inspect, plan, apply.

Never imports the operator or the lifecycle: the runner is the only caller.
"""
