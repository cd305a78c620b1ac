#!/bin/bash
# Run COMMAND under an NVIDIA MPS control daemon of its own: bash slurm/with-mps.sh COMMAND [ARG...]
#
# The array script (slurm/array.sbatch.tmpl, launcher.slurm.mps / `synbench submit --mps`) `exec`s this in
# front of experiments/launchers/pack.py, so the K runs packed on a GPU (--runs-per-gpu K) share it through
# one MPS server (their kernels run concurrently instead of time-slicing the GPU). The daemon is the job's:
# its pipe and log folders are ${TMPDIR:-/tmp}/synbench-mps-ARRAYJOB-TASK/{pipe,log} (as the task's log
# slurm-ARRAYJOB_TASK.out; CUDA_MPS_PIPE_DIRECTORY,
# CUDA_MPS_LOG_DIRECTORY, exported to COMMAND), so two jobs or array tasks on one node never share a daemon.
# It is stopped (`echo quit | nvidia-cuda-mps-control`) and the folder removed on every exit path: COMMAND
# ending well or not, and SIGUSR1 / SIGTERM, which are passed on to COMMAND (the packer saves its runs and
# requeues the task once) while this script waits for it and then cleans up. The exit status is COMMAND's.
# Outside SLURM (benchmarks/packed_runs.py --mps) the folder is named after this process instead.
set -u
if ! command -v nvidia-cuda-mps-control > /dev/null 2>&1; then
  echo "synbench: error: launcher.slurm.mps: nvidia-cuda-mps-control is not on PATH on $(uname -n 2>/dev/null || echo this node) (MPS needs an NVIDIA driver with its MPS tools); submit without --mps" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  echo "synbench: error: with-mps.sh: no command; usage: bash slurm/with-mps.sh COMMAND [ARG...]" >&2
  exit 2
fi
MPS_DIR="${TMPDIR:-/tmp}/synbench-mps-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local$$}}-${SLURM_ARRAY_TASK_ID:-0}"
export CUDA_MPS_PIPE_DIRECTORY="$MPS_DIR/pipe" CUDA_MPS_LOG_DIRECTORY="$MPS_DIR/log"
pid=""
pending=""
started=0

stop_mps() {  # on EXIT: quit the daemon (if it started), then remove its folders
  if [ "$started" = 1 ]; then
    echo quit | nvidia-cuda-mps-control || echo "synbench: warning: MPS daemon in $MPS_DIR did not quit" >&2
  fi
  rm -rf -- "$MPS_DIR"
}

forward() {  # pass a signal on to COMMAND (or keep it until COMMAND has started)
  if [ -n "$pid" ]; then kill "-$1" "$pid" 2> /dev/null; else pending=$1; fi
}

trap stop_mps EXIT
trap 'forward USR1' USR1
trap 'forward TERM' TERM
rm -rf -- "$MPS_DIR"  # a folder left by a killed earlier attempt of this task (requeue keeps the job id)
mkdir -p -m 700 -- "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" || exit 1
if ! nvidia-cuda-mps-control -d; then
  echo "synbench: error: launcher.slurm.mps: nvidia-cuda-mps-control -d failed (pipe folder $CUDA_MPS_PIPE_DIRECTORY)" >&2
  exit 1
fi
started=1
echo "synbench: MPS control daemon started, pipe folder $CUDA_MPS_PIPE_DIRECTORY"
"$@" &
pid=$!
if [ -n "$pending" ]; then kill "-$pending" "$pid" 2> /dev/null; fi
# a trapped signal interrupts `wait` (status > 128): wait again until COMMAND has ended, then take its status
while kill -0 "$pid" 2> /dev/null; do wait "$pid"; done
wait "$pid"
exit $?
