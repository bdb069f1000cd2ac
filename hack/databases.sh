#!/usr/bin/env bash
# Install and start private PostgreSQL 15 and MariaDB 10.11 instances on loopback
# for the engine tests and the bench. Idempotent: reuses running instances.
# Writes ${PTAH_CACHE}/db/env with PTAH_TEST_PG_URL, PTAH_TEST_PG_NOCREATEDB_URL,
# PTAH_TEST_MYSQL_URL (tests read env vars first, then that file).
#
# The data directories live on tmpfs (/dev/shm) when it has room, else under
# ${PTAH_CACHE}/db (PTAH_DB_ON_DISK=1 forces that). Why: this kind of machine's root file
# system is ext4 without a journal, and there the inode allocator skips every inode freed
# in the last minutes (fs/ext4/ialloc.c, recently_deleted), one buffer-cache lookup each,
# so loading a scratch of thousands of relations right after another scratch was dropped
# (what every plan after the first does) runs up to twice as long, in the kernel: the
# figures would measure the file system, not the planner. A journaled file system (any
# production server's) has no such check; neither has tmpfs. These are throw-away test
# servers (fsync is off already); a reboot empties tmpfs and the next run initialises
# them again in seconds.
set -euo pipefail
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
db=$PTAH_CACHE/db
mkdir -p "$db"
PG_PORT=${PTAH_PG_PORT:-55432}
MY_PORT=${PTAH_MYSQL_PORT:-53306}
data=$db
if [ -z "${PTAH_DB_ON_DISK:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
  [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -ge $((4 * 1024 * 1024)) ]; then
  data=/dev/shm/ptah-db-$PG_PORT-$MY_PORT
fi
mkdir -p "$data"
echo "databases: data directories under $data"
PG_BIN=/usr/lib/postgresql/15/bin
PW=ptah-test-pw

need=()
[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/postgres" ] || need+=(postgresql-15)
command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || need+=(mariadb-server)
# A C compiler: the confinement tests build a small loadable function (UDF) into the
# MariaDB server's plugin directory, to show a plan can neither call nor drop one.
command -v cc >/dev/null || need+=(gcc libc6-dev)
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
pgdata=$data/pg15
# A server of this port from the other place (an earlier layout, or PTAH_DB_ON_DISK
# switched) is stopped first: the port is this one's.
for other in "$db/pg15" "/dev/shm/ptah-db-$PG_PORT-$MY_PORT/pg15"; do
  if [ "$other" != "$pgdata" ] && [ -f "$other/postmaster.pid" ]; then
    run_as "$(stat -c %U "$other")" "$PG_BIN/pg_ctl" -D "$other" -m fast -w stop >/dev/null 2>&1 || true
  fi
done
if [ "$(id -u)" = 0 ]; then
  # postgres refuses to run as root, so the postgres user must reach $data: grant
  # traverse-only (o+x, not read) on each ancestor that lacks it.
  d=$data
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
mydata=$data/mariadb
mysock=$db/mariadb.sock
running=$(mariadb --no-defaults --socket="$mysock" -uroot -N -e 'SELECT @@datadir' 2>/dev/null || true)
if [ -n "$running" ] && [ "${running%/}" != "$mydata" ]; then
  # A server of this socket from the other place (see the PostgreSQL stop above).
  mariadb-admin --no-defaults --socket="$mysock" -uroot shutdown >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    mariadb-admin --no-defaults --socket="$mysock" -uroot ping >/dev/null 2>&1 || break
    sleep 0.5
  done
fi
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
