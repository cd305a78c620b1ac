#!/usr/bin/env bash
# Every GPU measurement of the benchmarks/ scripts in one prepared run of under 8 minutes, for a lent device:
#
#   bash benchmarks/gpu_session.sh                # on the GPU: outputs in benchmarks/results/DEVICE-DATE/
#   bash benchmarks/gpu_session.sh --cpu-check    # the same steps at toy sizes on the CPU (check the script first)
#   ... --out DIR                                 # another output folder
#
# Each step runs under its own time limit (their sum is the 8-minute bound) and writes N-NAME.txt; a step that
# fails or runs out of time is marked in its file and in summary.txt, and the next step still runs. Every script
# prints its ratios against the reference measured in the same run (see each script's docstring).
# Needs the prepared data ($SYNBENCH_DATA or ~/.cache/synbench/data: `synbench prepare`), and for the CAG step
# the official CAG's patched transformers 4.11.3 in .cache/cag-transformers-4.11.3 (the --cpu-check run builds it
# from PyPI; the device reaches no network, so carry .cache there).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=cuda
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --cpu-check) mode=cpu; shift ;;
    --out)
      if [ $# -lt 2 ]; then echo "synbench: error: gpu_session.sh: --out needs a folder" >&2; exit 2; fi
      out=$2; shift 2 ;;
    *) echo "synbench: error: gpu_session.sh: unknown argument ${1@Q}; usage: bash benchmarks/gpu_session.sh [--cpu-check] [--out DIR]" >&2
       exit 2 ;;
  esac
done
PY=${PYTHON:-.venv/bin/python}
if [ "$mode" = cuda ]; then
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE 'h100|h200|a100|l40s|l4|a10g|v100' \
           | head -1 | tr 'A-Z' 'a-z')
  device=${device:-gpu}
else
  device=cpu
fi
out=${out:-benchmarks/results/$device-$(date +%F)}
mkdir -p "$out"
: > "$out/summary.txt"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}

step() {  # step N NAME SECONDS ARGV... : one measurement, its output in N-NAME.txt
  local n=$1 name=$2 limit=$3
  shift 3
  local file="$out/$n-$name.txt" start=$SECONDS
  echo "\$ $*" > "$file"
  timeout "$limit" "$@" >> "$file" 2>&1
  local code=$?
  local took=$((SECONDS - start))
  case $code in
    0) state=ok ;;
    124) state="out of time (limit ${limit} s)" ;;
    *) state="failed (exit status $code)" ;;
  esac
  echo "# $state after $took s" >> "$file"
  printf '%-22s %-32s %4d s\n' "$n-$name" "$state" "$took" | tee -a "$out/summary.txt"
}

{ date -u; nvidia-smi 2>/dev/null || echo "no nvidia-smi"; "$PY" -c 'import torch, sys; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'; } \
  > "$out/1-env.txt" 2>&1

if [ "$mode" = cuda ]; then
  # bf16 dense peak of an H100/H200 SXM (989 TFLOP/s): MFU's denominator
  step 2 training_step 45 "$PY" benchmarks/training_step.py --device cuda --preset ptb --precision bf16 --steps 20 \
    --peak-tflops 989
  step 3 seed_group 40 "$PY" benchmarks/seed_group.py --device cuda --preset ptb --sizes 1 4 --steps 5 \
    --batch-size 16 --repeats 1 --sync-check
  step 4 marginalize 35 "$PY" benchmarks/marginalize.py --device cuda --preset ptb --sentences 4 --proposals 100 --bf16 \
    --proposal-kind k-best --skip-one --skip-beam --repeats 1
  step 5 tg_beam 30 "$PY" benchmarks/tg_beam.py --device cuda --preset ptb --sentences 2 --beam 20 --word-beam 5 \
    --max-actions 8 --curve
  step 6 pushdown_beam 30 "$PY" benchmarks/pushdown_beam.py --device cuda --lengths 20 --beams 32 300 --sentences 2
  step 7 attention 25 "$PY" benchmarks/attention.py --device cuda --lengths 256 1024
  step 8 pushdown_attention 25 "$PY" benchmarks/pushdown_attention.py --device cuda --lengths 256 1024 --flex
  step 9 paper_cost_eval 35 "$PY" benchmarks/paper_cost.py --eval --device cuda --preset ptb --sample 3
  # K runs packed on the GPU (--runs-per-gpu), with and without MPS when the driver's MPS tools are here, vs solo
  # runs; 20 steps per run, so start-up weighs as in short runs
  mps=$(command -v nvidia-cuda-mps-control > /dev/null && echo --mps)
  step 10 packed_runs 40 "$PY" benchmarks/packed_runs.py --device cuda --preset ptb --runs-per-gpu 1 4 8 $mps \
    --steps 20 --rounds 1
  # RNNG against the official rnng-pytorch code (the golden archive): the official PTB size, its beam 100/10/1
  step 11 rnng 20 "$PY" benchmarks/rnng.py --device cuda --size 256 --layers 2 --batch 64 --steps 5 \
    --sentences 4 --max-words 15 --beam 100 --word-beam 10 --beam-batch 4
  # a seed group's attention folded into one SDPA call (memory-efficient kernel) vs the math path it replaced:
  # kernels per step, attention time and peak memory
  step 12 seed_group_kernels 20 "$PY" benchmarks/seed_group.py --kernels --device cuda --preset ptb --sizes 1 8 \
    --batch-size 16 --repeats 1
  # CAG against the official osekilab/CAG code: the README's size (3 layers of 256, 4 heads), batch 32, 100/10/5
  step 13 cag 15 "$PY" benchmarks/cag.py --device cuda --transformers .cache/cag-transformers-4.11.3 --batch 32 \
    --steps 5 --sentences 4 --max-words 15 --beam-batch 4
  # the group's loss (full logits vs chunked at labelled positions: peak memory per seed) and its optimizer phase
  # (per-parameter vs flat buffers: kernels), in one process; S = 8 here (the 30 s taken from step 3's S = 8)
  step 14 seed_group_phases 20 "$PY" benchmarks/seed_group.py --device cuda --preset ptb --phases --sizes 4 8 \
    --steps 3 --batch-size 16 --repeats 1
  # TG Table 1's training device-hours (solo, a group of 32, 8 runs under MPS), TG's row only: each way is three
  # real runs (27 launches for the three models would not fit); limits of steps 2-10, 12 and 14 cut for it (sum
  # 480 s)
  step 15 paper_cost_train 100 "$PY" benchmarks/paper_cost.py --train --device cuda --models tg --steps 10 \
    --group 32 --runs-per-gpu 8 $mps
else
  step 2 training_step 90 "$PY" benchmarks/training_step.py --device cpu --tiny --steps 3 --warmup 1
  step 3 seed_group 120 "$PY" benchmarks/seed_group.py --device cpu --sizes 1 2 --steps 1 --batch-size 2 --repeats 1 \
    --sync-check
  step 4 marginalize 60 "$PY" benchmarks/marginalize.py --device cpu --sentences 2 --proposals 8 --bf16 \
    --proposal-kind k-best --skip-one --skip-beam --repeats 1
  step 5 tg_beam 60 "$PY" benchmarks/tg_beam.py --device cpu --sentences 2 --max-words 8 --beam 5 --word-beam 2 \
    --rounds 1 --curve
  step 6 pushdown_beam 60 "$PY" benchmarks/pushdown_beam.py --device cpu --lengths 10 --beams 8 --sentences 1
  # benchmarks/attention.py times compiled FlexAttention, whose CPU build fails in torch 2.13 (inductor's C++
  # flex template: "cur_kvSplitSize5 was not declared"): GPU only
  printf '%-22s %-32s %4d s\n' "7-attention" "skipped (compiled flex: GPU only)" 0 | tee -a "$out/summary.txt"
  step 8 pushdown_attention 40 "$PY" benchmarks/pushdown_attention.py --device cpu --lengths 64 --repeats 1
  step 9 paper_cost_eval 60 "$PY" benchmarks/paper_cost.py --eval --device cpu --preset cpu-small --sample 1 \
    --proposals 4 --beam 3 2 2
  # MPS is refused on the CPU (benchmarks/packed_runs.py says so in one line): packed vs solo only; a tiny run
  # took 69-77 s here (2 cores, load 6-11), so a generous limit
  step 10 packed_runs 240 "$PY" benchmarks/packed_runs.py --device cpu --tiny --preset cpu-small --runs-per-gpu 1 2 \
    --steps 2 --rounds 1
  step 11 rnng 90 "$PY" benchmarks/rnng.py --device cpu --size 16 --layers 1 --batch 4 --steps 2 --sentences 2 \
    --max-words 8 --beam 4 --word-beam 2 --beam-batch 2
  step 12 seed_group_kernels 90 "$PY" benchmarks/seed_group.py --kernels --device cpu --sizes 1 2 --batch-size 2 \
    --repeats 1 --length 32
  step 13 cag 120 "$PY" benchmarks/cag.py --device cpu --transformers .cache/cag-transformers-4.11.3 --size 16 \
    --layers 1 --heads 2 --batch 4 --steps 2 --sentences 2 --max-words 8 --beam 4 --word-beam 2 --shift-size 1 \
    --beam-batch 2
  step 14 seed_group_phases 60 "$PY" benchmarks/seed_group.py --device cpu --phases --sizes 2 --steps 1 \
    --batch-size 2 --repeats 1
  step 15 paper_cost_train 240 "$PY" benchmarks/paper_cost.py --train --device cpu --preset cpu-small --tiny \
    --models tg --steps 2 --group 2 --runs-per-gpu 2
fi
echo "outputs: $out"
! grep -v " ok \| skipped " "$out/summary.txt" > /dev/null
