#!/usr/bin/env bash
# Stop the PostgreSQL cluster started by slurm/postgres-up.sh; `--purge` also deletes its data folder.
set -uo pipefail

DIR=${SYNBENCH_PG_DIR:-/tmp/synbench-pg}
if [ -s "$DIR/data/PG_VERSION" ]; then
  runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$DIR/data" -m fast -w stop >/dev/null 2>&1
fi
if [ "${1:-}" = "--purge" ]; then
  rm -rf "$DIR"
fi
exit 0
