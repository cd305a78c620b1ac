#!/usr/bin/env bash
# Stop everything slurm/cluster-up.sh started, by pid file (never by process name).
# `--purge` also deletes $SLURM_CI_DIR (job state, logs, the accounting database): the next start is a fresh
# cluster whose job ids start at 1 again.
set -uo pipefail

RUN=${SLURM_CI_DIR:-/tmp/synbench-slurm}

stop_pidfile() {  # stop_pidfile FILE: TERM the process it names and wait up to 10 s
  local pid
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "cluster-down: pid $pid from $1 did not stop, killing it" >&2
  kill -KILL "$pid" 2>/dev/null
}

# `scontrol shutdown` stops slurmctld and slurmd cleanly (state saved to $RUN/state: pending jobs survive a
# restart); the pid files are the fallback when the controller does not answer.
scontrol shutdown 2>/dev/null
stop_pidfile "$RUN/slurmd.pid"
stop_pidfile "$RUN/slurmctld.pid"
stop_pidfile "$RUN/slurmdbd.pid"
stop_pidfile "$RUN/mysqld.pid"
stop_pidfile /run/munge/munged.pid

if [ "${1:-}" = "--purge" ]; then
  rm -rf "$RUN"
fi
exit 0
