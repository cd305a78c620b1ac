#!/usr/bin/env bash
# Start a throw-away PostgreSQL 15 cluster under $SYNBENCH_PG_DIR (default /tmp/synbench-pg) on 127.0.0.1,
# port $SYNBENCH_PG_PORT (default 5433), with a database `synbench`, and print the URL Optuna should use.
# Idempotent: an already running server is reused. Run as root (the server itself runs as `postgres`,
# which refuses root). `postgres-down.sh --purge` deletes the cluster.
set -euo pipefail

DIR=${SYNBENCH_PG_DIR:-/tmp/synbench-pg}
PORT=${SYNBENCH_PG_PORT:-5433}
BIN=/usr/lib/postgresql/15/bin
if [ ! -x "$BIN/initdb" ]; then
  echo "postgres-up: PostgreSQL 15 is not installed (run slurm/install-deps.sh)" >&2
  exit 1
fi
as_postgres() { runuser -u postgres -- "$@"; }

mkdir -p "$DIR" && chown postgres:postgres "$DIR"
if [ ! -s "$DIR/data/PG_VERSION" ]; then
  as_postgres "$BIN/initdb" -D "$DIR/data" -A trust -U postgres >"$DIR/initdb.log"
fi
if ! as_postgres "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
  as_postgres "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null
fi
psql_pg() { psql -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ "$(psql_pg -c "SELECT 1 FROM pg_database WHERE datname = 'synbench'")" != 1 ]; then
  psql_pg -c "CREATE DATABASE synbench"
fi
echo "postgresql://postgres@127.0.0.1:$PORT/synbench"
