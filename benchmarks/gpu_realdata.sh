#!/usr/bin/env bash
# The real-data table at the paper's size on one borrowed GPU, in one call of
# under ten minutes: every split of every data set in its own process, side by
# side on the GPU, each network fit capped at MAX_TIME seconds of epochs; the
# CUDA tests and the CUDA-relevant test files run beside them.
#
# Usage (from the repository root, on the GPU machine):
#
#     OUT=/some/dir bash benchmarks/gpu_realdata.sh
#
# DEVICE=cpu N_SUBJECTS=120 MAX_TIME=5 RUN_TESTS=0 bash benchmarks/gpu_realdata.sh
# checks the script itself on a machine without a GPU, in a few minutes.
# JOBS (dataset:first-split:number-of-splits ...), METHODS, MAX_TIME, LIMIT and
# TEST_ARGS (pytest's arguments, "-m cuda tests" say) change what runs.
#
# Each process saves its splits as they finish ($OUT/rows/*.json, packed with
# the logs into $OUT/gpu_realdata.tgz at the end); pool them with
# `python benchmarks/bench_realdata.py --load-rows rows/*.json`.
set -u
OUT=${OUT:-/tmp/gpu_realdata}
mkdir -p "$OUT/rows" "$OUT/logs"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
MAX_TIME=${MAX_TIME:-170}
LIMIT=${LIMIT:-500}
METHODS=${METHODS:-PACE SAND SAND+base}
SUBSET=${N_SUBJECTS:+--n-subjects $N_SUBJECTS}
stamp() { echo "[$(date +%T)] $*" | tee -a "$OUT/timeline.txt"; }

stamp start
{
    nvidia-smi
    $PY -c "import sys, torch, numpy, scipy, sklearn; print(sys.version); \
print('torch', torch.__version__, 'cuda', torch.version.cuda, \
torch.cuda.is_available() and torch.cuda.get_device_name(0)); \
print('numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
} >"$OUT/env.txt" 2>&1

# dataset:first-split:number-of-splits, one process each
JOBS=${JOBS:-uk-30:0:1 uk-30:1:1 uk-30:2:1 uk-30:3:1 uk-30:4:1 \
uk-3-5:0:1 uk-3-5:1:1 uk-3-5:2:1 uk-3-5:3:1 uk-3-5:4:1 \
uk-8-12:0:1 uk-8-12:1:1 uk-8-12:2:1 framingham:0:5}
for job in $JOBS; do
    IFS=: read -r data first count <<<"$job"
    # shellcheck disable=SC2086
    timeout "$LIMIT" $PY benchmarks/bench_realdata.py --datasets "$data" \
        --methods $METHODS --splits "$count" --split-start "$first" \
        --device "$DEVICE" --max-time "$MAX_TIME" --no-calibration $SUBSET \
        --save-rows "$OUT/rows/$data-$first.json" >"$OUT/logs/$data-$first.txt" 2>&1 &
done
stamp "fits started: $JOBS"

if [ "${RUN_TESTS:-1}" = 1 ]; then
    XDIST=$($PY -c "import xdist" 2>/dev/null && echo "-n 3")
    TEST_ARGS=${TEST_ARGS:-tests/test_neural.py tests/test_nn.py tests/test_norms.py \
tests/test_neural_base.py tests/test_neural_variables.py tests/test_uncertainty.py \
tests/test_features.py tests/test_cnp.py tests/test_gain.py tests/test_distributed.py \
tests/test_persistence.py tests/test_pace_chunked.py}
    # shellcheck disable=SC2086
    timeout "$LIMIT" $PY -m pytest -q -p no:cacheprovider -rfEs $XDIST $TEST_ARGS \
        >"$OUT/tests.txt" 2>&1
    echo "rc=$?" >>"$OUT/tests.txt"
    stamp tests done
fi
sleep 2
nvidia-smi >"$OUT/nvidia_smi_during_fits.txt" 2>&1
wait
stamp fits done
$PY benchmarks/bench_realdata.py --load-rows "$OUT"/rows/*.json >"$OUT/table.txt" 2>&1
# one archive: the device tool returns only a few files
tar czf "$OUT/gpu_realdata.tgz" -C "$OUT" rows logs && rm -rf "$OUT/rows" "$OUT/logs"
for f in timeline env tests table; do
    echo "=== $f"
    tail -n 30 "$OUT/$f.txt" 2>/dev/null
done
echo "=== gate"
tar xzf "$OUT/gpu_realdata.tgz" -O --wildcards 'logs/*' | grep "gate gain" | head -40
