#!/usr/bin/env bash
# Install and start private PostgreSQL 15 and MariaDB 10.11 instances on loopback
# for the engine tests and the bench. Idempotent: reuses running instances.
# Writes ${PTAH_CACHE}/db/env with PTAH_TEST_PG_URL, PTAH_TEST_PG_NOCREATEDB_URL,
# PTAH_TEST_MYSQL_URL (tests read env vars first, then that file).
set -euo pipefail
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
db=$PTAH_CACHE/db
mkdir -p "$db"
PG_PORT=${PTAH_PG_PORT:-55432}
MY_PORT=${PTAH_MYSQL_PORT:-53306}
PG_BIN=/usr/lib/postgresql/15/bin
PW=ptah-test-pw

need=()
[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/postgres" ] || need+=(postgresql-15)
command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || need+=(mariadb-server)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "databases.sh: need root to install ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The distribution's own services are not ours: never rely on them.
run_as() { # user cmd...
  if [ "$(id -u)" = 0 ]; then su -s /bin/sh "$1" -c "$(printf '%q ' "${@:2}")"; else "${@:2}"; fi
}
owner=$(id -un)
[ "$(id -u)" = 0 ] && owner=postgres

# --- PostgreSQL 15 -----------------------------------------------------------
pgdata=$db/pg15
if [ "$(id -u)" = 0 ]; then
  # postgres refuses to run as root, so the postgres user must reach $db: grant
  # traverse-only (o+x, not read) on each ancestor that lacks it.
  d=$db
  while [ "$d" != / ]; do
    [ "$(stat -c %A "$d" | cut -c10)" = x ] || chmod o+x "$d"
    d=$(dirname "$d")
  done
fi
if [ ! -f "$pgdata/PG_VERSION" ]; then
  mkdir -p "$pgdata"; chown "$owner" "$pgdata" 2>/dev/null || true; chmod 700 "$pgdata"
  pwfile=$(mktemp); echo "$PW" >"$pwfile"; chmod 644 "$pwfile"
  run_as "$owner" "$PG_BIN/initdb" -D "$pgdata" -U ptah --pwfile="$pwfile" -A scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  cat >>"$pgdata/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$pgdata'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
max_connections = 100
CONF
fi
if ! run_as "$owner" "$PG_BIN/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
  run_as "$owner" "$PG_BIN/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -w -t 60 start >/dev/null
fi
psqlc() { PGPASSWORD=$PW psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U ptah "$@"; }
psqlc -d postgres -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SELECT 'CREATE DATABASE ptah_test' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname='ptah_test')\gexec
SELECT 'CREATE DATABASE ptah_bench' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname='ptah_bench')\gexec
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname='ptah_nocreatedb') THEN
    CREATE ROLE ptah_nocreatedb LOGIN NOCREATEDB PASSWORD 'ptah-nocreatedb-pw';
  END IF;
END $$;
SELECT 'CREATE DATABASE ptah_nocreatedb OWNER ptah_nocreatedb' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname='ptah_nocreatedb')\gexec
SQL

# --- MariaDB 10.11 -------------------------------------------------------------
mydata=$db/mariadb
mysock=$db/mariadb.sock
if [ ! -d "$mydata/mysql" ]; then
  mkdir -p "$mydata"
  mariadb-install-db --no-defaults --datadir="$mydata" --user="$(id -un)" \
    --auth-root-authentication-method=normal --skip-test-db >"$db/mariadb-install.log" 2>&1
fi
if ! mariadb-admin --no-defaults --socket="$mysock" -uroot ping >/dev/null 2>&1; then
  nohup mariadbd --no-defaults --datadir="$mydata" --user="$(id -un)" \
    --bind-address=127.0.0.1 --port="$MY_PORT" --socket="$mysock" \
    --pid-file="$db/mariadb.pid" --log-error="$db/mariadb.err" \
    --skip-name-resolve --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=0 \
    >/dev/null 2>&1 &
  for _ in $(seq 1 60); do
    mariadb-admin --no-defaults --socket="$mysock" -uroot ping >/dev/null 2>&1 && break
    sleep 0.5
  done
fi
mariadb --no-defaults --socket="$mysock" -uroot <<SQL
CREATE USER IF NOT EXISTS 'ptah'@'127.0.0.1' IDENTIFIED BY '$PW';
CREATE USER IF NOT EXISTS 'ptah'@'localhost' IDENTIFIED BY '$PW';
GRANT ALL PRIVILEGES ON *.* TO 'ptah'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'ptah'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS ptah_test;
FLUSH PRIVILEGES;
SQL

cat >"$db/env" <<ENV
PTAH_TEST_PG_URL=postgresql://ptah:$PW@127.0.0.1:$PG_PORT/ptah_test
PTAH_TEST_PG_NOCREATEDB_URL=postgresql://ptah_nocreatedb:ptah-nocreatedb-pw@127.0.0.1:$PG_PORT/ptah_nocreatedb
PTAH_TEST_PG_BENCH_URL=postgresql://ptah:$PW@127.0.0.1:$PG_PORT/ptah_bench
PTAH_TEST_MYSQL_URL=mysql://ptah:$PW@127.0.0.1:$MY_PORT/ptah_test
ENV
cat "$db/env"
