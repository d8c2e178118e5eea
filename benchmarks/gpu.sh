#!/usr/bin/env bash
# The GPU run, as one prepared command for the offline H200 machine (repository root as cwd):
#   bash benchmarks/gpu.sh            (carry benchmarks/wheels, filled by benchmarks/fetch_wheels.sh)
# Writes results to ${OUT:-benchmarks}/results_gpu.json and .md; QUICK=1 only runs the smoke test.
set -uo pipefail
OUT=${OUT:-benchmarks}
if ls benchmarks/wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install --no-index --no-deps --quiet benchmarks/wheels/*.whl 2>&1 | tail -3
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 benchmarks/bench.py --device cuda --model-size 1.5b --quick --json-out "$OUT/quick_gpu.json" \
    --markdown-out "$OUT/quick_gpu.md" 2>&1 | grep -v -i "warn" | tail -40
[ "${QUICK:-0}" = 1 ] && exit 0
python3 benchmarks/bench.py --device cuda --model-size 1.5b --rows 1 64 256 --json-out "$OUT/results_gpu.json" \
    --markdown-out "$OUT/results_gpu.md" 2>&1 | grep -v -i "warn" | tail -120
