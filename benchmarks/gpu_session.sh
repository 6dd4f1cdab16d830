#!/usr/bin/env bash
# Everything that needs a GPU, in one run of a few minutes on a borrowed machine:
# the whole test suite (CUDA tests included), a profile of training, transform
# throughput, SAND on the paper's process at n = 10,000 under a time budget
# (several settings side by side on the one GPU), and torchrun with NCCL.
#
# Usage (from the repository root, on the GPU machine):
#
#     OUT=/some/dir bash benchmarks/gpu_session.sh [BUDGET_SECONDS]
#
# DEVICE=cpu N=600 PROFILE_N=300 THROUGHPUT_N=2000 RUN_TESTS=0 \
#     bash benchmarks/gpu_session.sh 5
# checks the script itself on a machine without a GPU, in a few minutes.
#
# Logs, saved rows and the docs sections the benchmarks wrote (sections.md, to
# be copied into docs/benchmarks.md) end up in $OUT/gpu.tgz; the tail of each
# log is printed at the end.
set -u
OUT=${OUT:-/tmp/gpu_session}
BUDGET=${1:-240}
W=$OUT/w
mkdir -p "$W"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export FDAIMPUTE_BENCH_DOC=$W/sections.md
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
N=${N:-10000}
PROFILE_N=${PROFILE_N:-2000}
THROUGHPUT_N=${THROUGHPUT_N:-100000}
stamp() { echo "[$(date +%T)] $*" | tee -a "$W/timeline.txt"; }

stamp start
{
    nvidia-smi
    $PY -c "import sys, torch, numpy, scipy, sklearn; print(sys.version); \
print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.get_device_name(0)); print('numpy', numpy.__version__, 'scipy', \
scipy.__version__, 'sklearn', sklearn.__version__)"
    $PY -m pip install -q --no-deps --no-build-isolation --no-index -e . 2>&1 | tail -3
} >"$W/env.txt" 2>&1
stamp env done

# 1. the tests, in the background: the CUDA ones first, then the rest
[ "${RUN_TESTS:-1}" = 1 ] && (
    timeout 120 $PY -m pytest -q -m cuda -p no:cacheprovider -rfEs \
        >"$W/tests_cuda.txt" 2>&1
    echo "rc=$?" >>"$W/tests_cuda.txt"
    timeout 420 $PY -m pytest -q -m "not cuda" -n 6 -p no:cacheprovider -rfE \
        --durations=15 >"$W/tests.txt" 2>&1
    echo "rc=$?" >>"$W/tests.txt"
) &
[ "${RUN_TESTS:-1}" = 1 ] && TESTS=$!

# 2. where a training step's time goes (n = 2,000: the profiler stays light)
timeout 200 $PY benchmarks/profile_training.py --device "$DEVICE" --n "$PROFILE_N" \
    --sparsity 8-12 --preset cpu paper --amp off bfloat16 float16 --epochs 3 \
    --save "$W/profile.json" >"$W/profile.txt" 2>&1
timeout 120 $PY benchmarks/profile_training.py --device "$DEVICE" --n "$PROFILE_N" \
    --sparsity 8-12 --preset cpu paper --amp off bfloat16 --cuda-graph on \
    --epochs 3 --save "$W/profile_graph.json" >"$W/profile_graph.txt" 2>&1
stamp profile done

# 3. transform throughput, 10^5 subjects, two batch sizes
timeout 150 $PY benchmarks/bench_neural.py --throughput --device "$DEVICE" \
    --throughput-n "$THROUGHPUT_N" --predict-batch-size 256 4096 --repeats 3 --write \
    >"$W/throughput.txt" 2>&1
stamp throughput done

# 4. SAND alone at n = 10,000, 8-12 observations, BUDGET seconds of epochs each,
#    four settings side by side on the GPU (plus torchrun in the background)
fit() {
    local name=$1
    shift
    timeout $((BUDGET + 120)) $PY benchmarks/bench_neural.py --n "$N" \
        --sparsity 8-12 --device "$DEVICE" --max-time "$BUDGET" --epochs 5000 \
        --save-rows "$W/fit_$name.json" "$@" >"$W/fit_$name.txt" 2>&1
}
fit cpu --methods oracle pace sand &
fit cpu_graph --methods sand --cuda-graph &
fit paper_graph --methods sand --preset paper --cuda-graph &
fit wide_graph --methods sand --d-model 128 --encoder-layers 6 --decoder-layers 6 \
    --dim-feedforward 512 --batch-size 256 --lr 0.001 --cuda-graph &
timeout $((BUDGET + 150)) $PY benchmarks/bench_distributed.py --device "$DEVICE" \
    --backend nccl gloo --n 2000 --epochs 3 --methods SANDImputer --write \
    --log-dir "$W/distributed_logs" \
    >"$W/distributed.txt" 2>&1 &
sleep 5
nvidia-smi >"$W/nvidia_smi_during_fits.txt" 2>&1
wait $(jobs -p | grep -v "^${TESTS:-none}$")
stamp fits done
$PY benchmarks/bench_neural.py --load-rows "$W"/fit_*.json --section neural-gpu \
    --note "Four fits ran side by side on the one GPU (one process each), \
each with max_time=$BUDGET s of epochs; torchrun and the test suite ran beside them:" \
    --write >"$W/fits_table.txt" 2>&1

[ -n "${TESTS:-}" ] && wait "$TESTS"
stamp tests done
tar czf "$OUT/gpu.tgz" -C "$W" .
for f in timeline env tests_cuda tests profile profile_graph throughput fits_table \
    distributed; do
    echo "=== $f"
    tail -n 25 "$W/$f.txt" 2>/dev/null
done
