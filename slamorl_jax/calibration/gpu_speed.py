"""Compute speed of each GPU type relative to a workload's calibration GPU.

* Gavel workloads (calibrated on V100): K80 and P100 from Gavel's own 1-GPU measurements at the
  workload's batch; T4 / V100 the model's own where Pollux measured it too (ResNet-18, ResNet-50),
  else the geometric mean below.
* T4 / V100: Pollux measured ResNet-18/CIFAR-10 (``cifar10``) and ResNet-50/ImageNet
  (``imagenet``) on one T4; Gavel measured the same models on one V100. The Pollux 1-GPU
  throughput is interpolated (linear in log batch / log throughput between measured batches) to the
  Gavel batch and divided by the Gavel V100 throughput; the geometric mean of the two ratios is
  used for the Gavel workloads of other models (and for the Pollux workloads of models Gavel did
  not measure).
* Pollux workloads (calibrated on T4) whose model Gavel measured too (``cifar10``, ``imagenet``):
  K80, P100 and V100 = Gavel's 1-GPU samples/s of that model on that GPU over Pollux's T4 samples/s,
  both at the Gavel batch nearest (in log) the workload's per-GPU batch.
* The other Pollux workloads: K80 and P100 = median over Gavel's job types of the 1-GPU
  K80 / V100 and P100 / V100 ratios, divided by T4 / V100; V100 = 1 / (T4 / V100).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slamorl_jax.calibration import gavel_fit
from slamorl_jax.calibration.loaders import (
    DEFAULT_DATA_DIR,
    load_gavel_isolated,
    load_pollux_step_times,
)

GPU_TYPES: tuple[str, ...] = ("T4", "K80", "P100", "V100")
#: (Pollux app, Gavel job type) pairs that are the same model on the same dataset.
SHARED_MODELS: tuple[tuple[str, str], ...] = (("cifar10", "ResNet-18"), ("imagenet", "ResNet-50"))
#: Gavel's names of the GPU types it measured, in the simulator's order.
GAVEL_GPUS: tuple[str, ...] = ("k80", "p100", "v100")


def pollux_single_gpu_samples_per_s(app: str, batch: float, data_dir: Path = DEFAULT_DATA_DIR) -> float:
    """Pollux's measured 1-GPU throughput of ``app`` interpolated to per-GPU ``batch``.

    Linear interpolation in (log batch, log samples/s) between the measured batches; the batch
    must lie inside the measured range (no extrapolation).
    """
    d = load_pollux_step_times(app, data_dir)
    one = d.select((d.num_gpus == 1) & (d.source == "placements"))
    order = np.argsort(one.local_batch)
    lb, tp = one.local_batch[order], one.samples_per_s[order]
    if not lb[0] <= batch <= lb[-1]:
        raise ValueError(f"{app}: batch {batch} outside the measured 1-GPU range {lb[0]}..{lb[-1]}")
    return float(np.exp(np.interp(np.log(batch), np.log(lb), np.log(tp))))


@dataclass(frozen=True)
class T4V100Ratio:
    """T4 / V100 compute-speed ratio and its two ingredients."""

    ratio: float  # geometric mean over SHARED_MODELS
    per_model: dict[str, float]  # Gavel job type -> ratio at its chosen batch
    batches: dict[str, int]


def t4_over_v100(gavel_batches: dict[str, int], data_dir: Path = DEFAULT_DATA_DIR) -> T4V100Ratio:
    """T4 / V100 from the models measured in both datasets, at the Gavel workloads' batches."""
    iso = load_gavel_isolated(data_dir)
    per_model = {}
    for app, job in SHARED_MODELS:
        b = gavel_batches[job]
        v100 = iso[("v100", f"{job} (batch size {b})", 1)] * b
        per_model[job] = pollux_single_gpu_samples_per_s(app, b, data_dir) / v100
    ratio = float(np.exp(np.mean(np.log(list(per_model.values())))))
    return T4V100Ratio(
        ratio=ratio, per_model=per_model, batches={j: gavel_batches[j] for _, j in SHARED_MODELS}
    )


def gavel_single_gpu_ratio(job_name: str, gpu: str, data_dir: Path = DEFAULT_DATA_DIR) -> float:
    """Gavel's 1-GPU throughput of ``job_name`` on ``gpu`` (``"k80"``/``"p100"``) over V100."""
    iso = load_gavel_isolated(data_dir)
    return iso[(gpu, job_name, 1)] / iso[("v100", job_name, 1)]


def median_gavel_ratios(data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, float]:
    """Median over all of Gavel's job types of the 1-GPU K80 / V100 and P100 / V100 ratios."""
    iso = load_gavel_isolated(data_dir)
    jobs = sorted(j for (w, j, s) in iso if w == "v100" and s == 1)
    out = {}
    for gpu in ("k80", "p100"):
        vals = [iso[(gpu, j, 1)] / iso[("v100", j, 1)] for j in jobs if iso.get((gpu, j, 1), 0.0) > 0.0]
        out[gpu.upper()] = float(np.median(vals))
    out["num_job_types"] = float(len(jobs))
    return out


def nearest_batch(job_type: str, batch: float, gpus: Sequence[str], data_dir: Path = DEFAULT_DATA_DIR) -> int:
    """The per-GPU batch of ``job_type`` nearest ``batch`` in log that Gavel measured on one GPU of
    every type in ``gpus`` (Gavel's names, e.g. ``"k80"``)."""
    iso = load_gavel_isolated(data_dir)
    measured = [
        b
        for b in gavel_fit.batches_measured(job_type, data_dir)
        if all(iso.get((g, gavel_fit.job_key(job_type, b), 1), 0.0) > 0.0 for g in gpus)
    ]
    if not measured:
        raise ValueError(f"{job_type}: no batch measured on one GPU of each of {', '.join(gpus)}")
    return min(measured, key=lambda b: abs(np.log(b / batch)))


def speed_over_t4(app: str, job_type: str, batch: int, gpu: str, data_dir: Path = DEFAULT_DATA_DIR) -> float:
    """Gavel's 1-GPU samples/s of ``job_type`` on ``gpu`` (``"k80"``, ``"p100"``, ``"v100"``) at
    ``batch`` over Pollux's 1-GPU T4 samples/s of the same model (``app``) at that batch."""
    gavel = load_gavel_isolated(data_dir)[(gpu, gavel_fit.job_key(job_type, batch), 1)] * batch
    return gavel / pollux_single_gpu_samples_per_s(app, batch, data_dir)


def shared_model(app: str) -> str | None:
    """Gavel's job type of the Pollux app ``app`` where Gavel measured the same model, else None."""
    return dict(SHARED_MODELS).get(app)


def same_model_batch(app: str, local_batch: float, data_dir: Path = DEFAULT_DATA_DIR) -> int:
    """The Gavel batch a shared-model Pollux app's speeds are read at: nearest its per-GPU batch
    among those Gavel measured on one GPU of every type."""
    job = shared_model(app)
    if job is None:
        raise ValueError(f"{app}: Gavel measured no model of this Pollux app")
    return nearest_batch(job, local_batch, GAVEL_GPUS, data_dir)


def gavel_workload_speeds(
    job_name: str, t4_ratio: float, data_dir: Path = DEFAULT_DATA_DIR
) -> dict[str, float]:
    """Compute speed of each GPU type relative to V100 for one Gavel job (name with batch);
    ``t4_ratio`` is its T4 / V100 (the model's own where Pollux measured it, else the mean)."""
    return {
        "T4": t4_ratio,
        "K80": gavel_single_gpu_ratio(job_name, "k80", data_dir),
        "P100": gavel_single_gpu_ratio(job_name, "p100", data_dir),
        "V100": 1.0,
    }


def pollux_workload_speeds(
    app: str, local_batch: float, t4_ratio: float, data_dir: Path = DEFAULT_DATA_DIR
) -> dict[str, float]:
    """Compute speed of each GPU type relative to T4 for the Pollux app ``app``: the same model's
    Gavel measurements over Pollux's T4 where Gavel measured it, else the median Gavel ratios
    over ``t4_ratio`` (T4 / V100)."""
    job = shared_model(app)
    if job is not None:
        batch = same_model_batch(app, local_batch, data_dir)
        return {"T4": 1.0} | {g.upper(): speed_over_t4(app, job, batch, g, data_dir) for g in GAVEL_GPUS}
    return median_pollux_speeds(t4_ratio, data_dir)


def median_pollux_speeds(t4_ratio: float, data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, float]:
    """Speeds relative to T4 of a Pollux workload with no model in Gavel's data: the median Gavel
    K80 / V100 and P100 / V100 ratios and V100 over ``t4_ratio`` (T4 / V100)."""
    med = median_gavel_ratios(data_dir)
    return {
        "T4": 1.0,
        "K80": med["K80"] / t4_ratio,
        "P100": med["P100"] / t4_ratio,
        "V100": 1.0 / t4_ratio,
    }
