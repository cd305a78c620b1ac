#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on localhost (Debian 12, slurm-wlm 22.05) as root: munged, MariaDB,
# slurmdbd (so `sacct` works), slurmctld and slurmd. Idempotent: a daemon whose pid file names a live process
# is left alone, so running this twice is cheap. All state (logs, pid files, slurmctld state, the MariaDB data
# directory) lives under $SLURM_CI_DIR (default /tmp/synbench-slurm); `cluster-down.sh --purge` wipes it.
# The configs go to /etc/slurm, where every SLURM client (sbatch, squeue, sacct) looks for them.
# Packages: slurm/install-deps.sh.
set -euo pipefail

RUN=${SLURM_CI_DIR:-/tmp/synbench-slurm}
DB_PORT=${SLURM_CI_DB_PORT:-3307}
NCPU=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the CPUs we may use: nproc also honours OMP_* (1 in a test)
MEM_MB=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 * 8 / 10 ))   # 80% of RAM for jobs

if ! command -v slurmctld >/dev/null; then
  echo "cluster-up: slurmctld is not installed (run slurm/install-deps.sh)" >&2
  exit 1
fi
mkdir -p "$RUN/state" "$RUN/slurmd"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for TRIES COMMAND...: poll every 0.1 s
  local tries=$1; shift
  for _ in $(seq "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# --- munge: authentication between clients and daemons ------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
munge_ok() { munge -n | unmunge; }
if ! munge_ok >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged --force
  wait_for 50 munge_ok || { echo "cluster-up: munged did not start" >&2; exit 1; }
fi

# --- accounting: MariaDB (data under $RUN) + slurmdbd -------------------------------------------------------
DB="$RUN/mysql"
SOCK="$RUN/mysqld.sock"
sql() { mariadb --socket="$SOCK" -u root "$@"; }
if ! alive "$RUN/mysqld.pid"; then
  if [ ! -d "$DB/mysql" ]; then
    mkdir -p "$DB" && chown mysql:mysql "$DB"
    mariadb-install-db --user=mysql --datadir="$DB" --auth-root-authentication-method=socket \
      >"$RUN/mariadb-install.log" 2>&1
  fi
  chown mysql:mysql "$RUN"
  setsid mariadbd --no-defaults --user=mysql --datadir="$DB" --socket="$SOCK" --port="$DB_PORT" \
    --bind-address=127.0.0.1 --pid-file="$RUN/mysqld.pid" --log-error="$RUN/mariadb.log" \
    --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
  wait_for 150 sql -e 'SELECT 1' || { echo "cluster-up: MariaDB did not start (see $RUN/mariadb.log)" >&2; exit 1; }
fi
sql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"

cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=$RUN/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
CONF
chmod 600 /etc/slurm/slurmdbd.conf
if ! alive "$RUN/slurmdbd.pid"; then
  slurmdbd
  wait_for 100 port_open 6819 || { echo "cluster-up: slurmdbd did not start (see $RUN/slurmdbd.log)" >&2; exit 1; }
fi

# --- slurm.conf ---------------------------------------------------------------------------------------------
# NodeName=localhost with `slurmd -N localhost` makes the cluster independent of the machine's hostname.
# AuthInfo=cred_expire=10: a requeued job may start again after ~10 s instead of the default 120 s.
# The scheduler parameters start jobs right after submission instead of at the next 60 s pass.
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/slurmd
SlurmctldLogFile=$RUN/slurmctld.log
SlurmdLogFile=$RUN/slurmd.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=5,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=300
JobCompType=jobcomp/filetxt
JobCompLoc=$RUN/jobcomp.txt
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

alive "$RUN/slurmctld.pid" || slurmctld
alive "$RUN/slurmd.pid" || slurmd -N localhost

node_up() { sinfo -h -o %T | grep -q -E '^(idle|mixed|allocated|completing)'; }
if ! wait_for 100 node_up; then
  # A node left DOWN/DRAINED by an earlier unclean stop: bring it back.
  scontrol update nodename=localhost state=resume 2>/dev/null || true
  wait_for 100 node_up || { echo "cluster-up: node did not come up (see $RUN/slurm*.log)" >&2; sinfo >&2; exit 1; }
fi
sinfo
