#!/usr/bin/env bash
# SAND against VT at their defaults on one borrowed GPU, in one call of under
# ten minutes (issue 40): n = 10,000 at three sparsities and three seeds for
# the networks alone, seed 0 with the PACE base, and n = 2,000 seed 0 alone
# (to set beside the CPU rows of the same draws). Three bench_sand_defaults.py
# processes side by side, one torch thread per fit.
#
# Usage (from the repository root, on the GPU machine):
#
#     OUT=/some/dir bash benchmarks/gpu_sand_defaults.sh
#
# DEVICE=cpu N_BIG=300 N_SMALL=200 N_TEST=100 LIMIT=300 bash benchmarks/gpu_sand_defaults.sh
# checks the script itself on a machine without a GPU. The rows come back in
# $OUT/rows.tgz (unpack it into benchmarks/results/sand_defaults/); table them
# with `python benchmarks/bench_sand_defaults.py --device cuda --from-saved`.
set -u
OUT=${OUT:-/tmp/gpu_sand_defaults}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT:-450}
N_BIG=${N_BIG:-10000}
N_SMALL=${N_SMALL:-2000}
N_TEST=${N_TEST:-1000}
BENCH="benchmarks/bench_sand_defaults.py --device $DEVICE --n-test $N_TEST"
stamp() { echo "[$(date +%T)] $*" | tee -a "$OUT/timeline.txt"; }

stamp start
{
    nvidia-smi
    $PY -c "import sys, torch, numpy, scipy; print(sys.version); \
print('torch', torch.__version__, torch.cuda.is_available() and \
torch.cuda.get_device_name(0)); print('numpy', numpy.__version__, 'scipy', scipy.__version__)"
} >"$OUT/env.txt" 2>&1
# shellcheck disable=SC2086
timeout -k 10 "$LIMIT" $PY $BENCH --n "$N_BIG" --variants default --jobs 12 \
    >"$OUT/big.txt" 2>&1 &
# shellcheck disable=SC2086
timeout -k 10 "$LIMIT" $PY $BENCH --n "$N_BIG" --variants "default, base=auto" \
    --seeds 0 --jobs 2 >"$OUT/big_base.txt" 2>&1 &
# shellcheck disable=SC2086
timeout -k 10 "$LIMIT" $PY $BENCH --n "$N_SMALL" --variants default --seeds 0 \
    --jobs 2 >"$OUT/small.txt" 2>&1 &
sleep 60
nvidia-smi >"$OUT/nvidia_smi_during_fits.txt" 2>&1
wait
pkill -f bench_sand_defaults.py
stamp fits done
dir=benchmarks/results/sand_defaults
[ "$DEVICE" = cpu ] || tar czf "$OUT/rows.tgz" -C "$dir" "$DEVICE"
for f in timeline env big big_base small; do
    echo "=== $f"
    grep -v "^|" "$OUT/$f.txt" | tail -n 40
done
