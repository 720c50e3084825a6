"""The targets' CPUs-per-GPU grid as a setting: checked, applied to env params, and named.

Every action set's observation describes the absolute targets (``action_sets.py``): every GPU
count of ``EnvParams.target_gpus`` x ``NUM_TARGET_CPUS_PER_GPU`` CPUs-per-GPU values. Those values
are a training setting (``TrainConfig.target_cpus_per_gpu``, ``--target_cpus_per_gpu``): a policy
trained on one grid reads its features and, with targets, takes its actions on that grid only, so
a run records its grid and everything that runs the policy builds its env params with it
(``agent.trainer.env_params_from_config``, ``LoadedPolicy.env_params``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from slamorl_jax.env.action_sets import NUM_TARGET_CPUS_PER_GPU
from slamorl_jax.env.derived import with_derived_tables
from slamorl_jax.env.params import EnvParams, with_values
from slamorl_jax.env.validation import SCALAR_RANGES

_, MAX_CPUS_PER_GPU, _ = SCALAR_RANGES["target_cpus_per_gpu"]


def check_target_grid(cpus_per_gpu: Sequence[float]) -> tuple[float, ...]:
    """``cpus_per_gpu`` as a tuple of floats if it is a valid grid: ``NUM_TARGET_CPUS_PER_GPU``
    finite values in ``[0, MAX_CPUS_PER_GPU]``, strictly increasing; else ``ValueError`` with a
    one-line reason. Targets still may coincide once rounded to the CPU step and clipped to the
    cluster (1 GPU at 0 and 2 CPUs per GPU on the default grid; more CPUs than the cluster allows a
    job), as they do on the default grid."""
    values = tuple(float(x) for x in cpus_per_gpu)
    where = f"--target_cpus_per_gpu must be {NUM_TARGET_CPUS_PER_GPU} increasing CPUs-per-GPU values"
    if len(values) != NUM_TARGET_CPUS_PER_GPU:
        raise ValueError(f"{where}, got {len(values)}: {list(values)}")
    if not all(math.isfinite(x) and 0.0 <= x <= MAX_CPUS_PER_GPU for x in values):
        raise ValueError(f"{where} in [0, {MAX_CPUS_PER_GPU:g}] (0: the fewest CPUs), got {list(values)}")
    if any(b <= a for a, b in itertools.pairwise(values)):
        raise ValueError(f"{where}, got {list(values)}")
    return values


def on_target_grid(params: EnvParams, cpus_per_gpu: Sequence[float]) -> bool:
    """Whether ``params``' targets are at ``cpus_per_gpu`` CPUs per GPU (compared as the float32
    values params hold)."""
    grid = np.asarray(tuple(cpus_per_gpu), np.float32)
    return np.array_equal(np.asarray(params.target_cpus_per_gpu, np.float32), grid)


def with_target_grid(params: EnvParams, cpus_per_gpu: Sequence[float]) -> EnvParams:
    """``params`` with the targets at ``cpus_per_gpu`` CPUs per GPU and the tables derived from them
    recomputed; ``params`` itself where its grid is that already."""
    grid = np.asarray(check_target_grid(cpus_per_gpu), np.float32)
    if on_target_grid(params, grid):
        return params
    return with_derived_tables(with_values(params, target_cpus_per_gpu=grid))


def grid_flag(cpus_per_gpu: Sequence[float]) -> str:
    """The grid as ``--target_cpus_per_gpu`` spells it: ``0,2,4,8,12``."""
    return ",".join(f"{x:g}" for x in cpus_per_gpu)
