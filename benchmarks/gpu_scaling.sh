#!/bin/bash
# One GPU, end to end in under 8 minutes: env-only and training steps/s at num_envs up to 2**20,
# compile time and peak device memory, the plain-Python job loop on this machine's CPU, and the
# machine named (benchmarks/results/scaling_gpu.json and .md). Run from the repository root:
#
#   bash benchmarks/gpu_scaling.sh
#
# Needs jax with CUDA (python -m pip install -e ".[cuda]"). Each row is its own process; a row that
# runs out of memory or time is recorded as failed and the rest go on; no row starts after 5 min.
# Issue 10's targets on one H200: env-only >= 1e8 steps/s and training >= 5e6 steps/s at the best
# num_envs, and the env >= 1000x the Python loop.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import jax; d = jax.devices(); print(d); assert d[0].platform == 'gpu', 'no GPU found'"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # peak_bytes_in_use then measures what a row needs
exec timeout 475 python -m benchmarks.scaling \
    --devices=native \
    --env-num-envs=4096,65536,262144,1048576 \
    --train-num-envs=16384,65536,262144,1048576 \
    --rounds=1 --repeats=3 --python-seconds=3 \
    --row-timeout=150 --budget-s=300 \
    --out=benchmarks/results/scaling_gpu.json "$@"
