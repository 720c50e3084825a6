"""What users ask for: distributions of requested GPU counts and CPUs per GPU.

* GPU counts: each request is snapped to the nearest bin of :data:`GPU_BINS` in log2 (round
  ``log2(n)`` half up, clip to the bins); Pollux apps use ``num_replicas`` of their jobs in
  ``pollux-osdi21/workloads/workload-*.csv``, data-parallel Gavel job types use ``num_gpus`` of the
  Philly-derived ``traces/philly.csv`` (every row asks for at least one GPU; the loader refuses
  a file with a 0-GPU row), non-data-parallel types ask for 1 GPU.
* CPUs per GPU: the 10/30/50/70/90th percentiles of ``cpu_milli / 1000 / num_gpu`` over the Alibaba
  ``openb`` tasks with at least one GPU, each with probability 1/5 (an equal-mass quantile
  summary: every value stands for a fifth of the tasks).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slamorl_jax.calibration.loaders import (
    DEFAULT_DATA_DIR,
    load_alibaba_cpus_per_gpu,
    load_philly_num_gpus,
    load_pollux_requested_replicas,
)

GPU_BINS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
CPU_PERCENTILES: tuple[float, ...] = (10.0, 30.0, 50.0, 70.0, 90.0)


def snap_to_bins(counts: np.ndarray) -> np.ndarray:
    """Index of the nearest bin (in log2) of every positive GPU count."""
    counts = np.asarray(counts, dtype=np.float64)
    if np.any(counts <= 0):
        raise ValueError("GPU counts must be positive")
    idx = np.floor(np.log2(counts) + 0.5).astype(np.int64)
    return np.clip(idx, 0, len(GPU_BINS) - 1)


def bin_probabilities(counts: np.ndarray) -> list[float]:
    """Empirical probability of each bin of :data:`GPU_BINS`."""
    hist = np.bincount(snap_to_bins(counts), minlength=len(GPU_BINS)).astype(np.float64)
    return [float(x) for x in hist / hist.sum()]


def single_gpu_probabilities() -> list[float]:
    """All mass on 1 GPU (workloads that cannot use more)."""
    return [1.0] + [0.0] * (len(GPU_BINS) - 1)


@dataclass(frozen=True)
class RequestDistributions:
    """Requested-allocation distributions shared by the workloads."""

    pollux_gpu_probs: dict[str, list[float]]  # per Pollux application
    philly_gpu_probs: list[float]  # data-parallel Gavel job types
    cpus_per_gpu_values: list[float]
    cpus_per_gpu_probs: list[float]
    num_pollux_jobs: dict[str, int]
    num_philly_jobs: int
    num_alibaba_tasks: int


def fit_requests(data_dir: Path = DEFAULT_DATA_DIR) -> RequestDistributions:
    """Distributions of requested GPUs (per source) and CPUs per GPU."""
    pollux = load_pollux_requested_replicas(data_dir)
    philly = load_philly_num_gpus(data_dir)
    cpus = load_alibaba_cpus_per_gpu(data_dir)
    values = np.percentile(cpus, CPU_PERCENTILES)
    return RequestDistributions(
        pollux_gpu_probs={app: bin_probabilities(n) for app, n in pollux.items()},
        philly_gpu_probs=bin_probabilities(philly),
        cpus_per_gpu_values=[float(v) for v in values],
        cpus_per_gpu_probs=[1.0 / len(CPU_PERCENTILES)] * len(CPU_PERCENTILES),
        num_pollux_jobs={app: len(n) for app, n in pollux.items()},
        num_philly_jobs=len(philly),
        num_alibaba_tasks=len(cpus),
    )
