#!/usr/bin/env bash
# CI services for the integration tests, idempotently: install the Debian packages if missing, start the
# single-node SLURM cluster (with slurmdbd + MariaDB for sacct) and the throw-away PostgreSQL server.
# Prints only the PostgreSQL URL on stdout (progress goes to stderr). `--stop` stops both again.
# The test fixtures (tests/slurm/conftest.py) reuse running services and start missing ones themselves.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "${1:-}" = "--stop" ]; then
  bash "$HERE/cluster-down.sh" >&2
  bash "$HERE/postgres-down.sh" >&2
  exit 0
fi
start=$(date +%s.%N)
bash "$HERE/install-deps.sh" >&2
installed=$(date +%s.%N)
bash "$HERE/cluster-up.sh" >&2
url=$(bash "$HERE/postgres-up.sh")
end=$(date +%s.%N)
awk -v a="$start" -v b="$installed" -v c="$end" \
  'BEGIN { printf "ci-services: packages %.1f s, services %.1f s\n", b - a, c - b }' >&2
echo "$url"
