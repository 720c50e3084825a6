#!/bin/bash
# One GPU, end to end in under 8 minutes: issue 10's whole scaling sweep, which the scaling part of
# benchmarks/gpu_session.sh runs at fewer sizes. Env-only and training steps/s at num_envs up to
# 2**20, compile time and peak device memory, the plain-Python job loop on this machine's CPU, and
# the machine named (benchmarks/results/scaling_gpu.json and .md; with $OUT set, also packed into
# $OUT/gpu_session.tgz). Run from the repository root:
#
#   bash benchmarks/gpu_scaling.sh
#
# Needs jax with CUDA (python -m pip install -e ".[cuda]", or .gpuwheels as gpu_session.sh says).
# Each row is its own process; a row that runs out of memory or time is recorded as failed and the
# rest go on; no row starts after 5 min. Issue 10's targets on one H200: env-only >= 1e8 steps/s and
# training >= 5e6 steps/s at the best num_envs, and the env >= 1000x the Python loop.
PARTS="machine scaling" SCALE_ENV=4096,65536,262144,1048576 SCALE_TRAIN=16384,65536,262144,1048576 \
    SCALE_BUDGET=300 SCALE_ROW=150 exec bash "$(dirname "$0")/gpu_session.sh"
