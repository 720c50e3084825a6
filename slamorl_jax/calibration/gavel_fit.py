"""Fit the step-time model to Gavel's measured V100 throughputs of one job type.

Data: ``gavel-osdi20/simulation_throughputs.json``, isolated runs (``"null"``) at one per-GPU batch:
``v100`` (GPUs consolidated on one server: intra-node sync) at 1/2/4/8 GPUs and
``v100_unconsolidated`` (GPUs spread over servers: inter-node sync) at 2/4/8 GPUs, 7 points.
Gavel's value is iterations/s summed over the workers, so samples/s = value x per-GPU batch.

Model choices (7 noisy points cannot pin down 7 parameters):

* one batch, so ``compute_beta_s = 0`` and ``compute_alpha_s`` = the measured 1-GPU seconds per
  iteration (the model's 1-GPU throughput is exactly ``1 / alpha_c`` iterations/s);
* ``gamma`` is not identifiable from these points (the fit error is flat in gamma), so it is fixed
  to the median of the six Pollux fits, which rest on 650-2,100 rows each;
* the four sync parameters are fitted (least squares on log throughput, all >= 0) on the 6 multi-GPU
  points.

Job types without multi-GPU data (A3C, CycleGAN, Recommendation) are not data-parallel: sync
parameters 0, gamma 1, and extra GPUs give no speed-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR, load_gavel_isolated
from slamorl_jax.calibration.model import StepModel, predict_samples_per_s, relative_errors

SCALE_FACTORS: tuple[int, ...] = (1, 2, 4, 8)


@dataclass(frozen=True)
class GavelPoints:
    """Measured isolated throughputs of one job type on one GPU family."""

    num_gpus: np.ndarray
    num_nodes: np.ndarray  # 1 = consolidated; k = spread (any value > 1 means "multi-node")
    samples_per_s: np.ndarray


def job_key(job_type: str, batch: int | None) -> str:
    """Gavel's job name, e.g. ``"ResNet-50 (batch size 64)"`` (or the bare name without batch)."""
    return job_type if batch is None else f"{job_type} (batch size {batch})"


def batches_measured(job_type: str, data_dir: Path = DEFAULT_DATA_DIR) -> list[int]:
    """Per-GPU batch sizes Gavel measured for ``job_type`` on V100."""
    iso = load_gavel_isolated(data_dir)
    prefix = f"{job_type} (batch size "
    return sorted(
        int(j[len(prefix) : -1]) for (w, j, s) in iso if w == "v100" and s == 1 and j.startswith(prefix)
    )


def gavel_points(
    job_type: str,
    batch: int | None,
    local_batch: int,
    gpu: str = "v100",
    data_dir: Path = DEFAULT_DATA_DIR,
) -> GavelPoints:
    """Measured (GPUs, nodes, samples/s) of a job type on a GPU family; failed (0) runs dropped."""
    iso = load_gavel_isolated(data_dir)
    name = job_key(job_type, batch)
    k, n, v = [], [], []
    for worker_type, spread in ((gpu, False), (f"{gpu}_unconsolidated", True)):
        for s in SCALE_FACTORS:
            if spread and s == 1:
                continue  # the same single-GPU run appears under both names
            val = iso.get((worker_type, name, s), 0.0)
            if val > 0.0:
                k.append(s)
                n.append(s if spread else 1)
                v.append(val * local_batch)
    return GavelPoints(
        num_gpus=np.asarray(k, dtype=np.float64),
        num_nodes=np.asarray(n, dtype=np.float64),
        samples_per_s=np.asarray(v, dtype=np.float64),
    )


def choose_batch(job_type: str, data_dir: Path = DEFAULT_DATA_DIR) -> int:
    """The largest per-GPU batch with all 7 V100 configurations measured.

    See docs/calibration.md for why (the steadiest multi-GPU measurements).
    """
    full = [
        b
        for b in batches_measured(job_type, data_dir)
        if len(gavel_points(job_type, b, b, "v100", data_dir).num_gpus) == 2 * len(SCALE_FACTORS) - 1
    ]
    if not full:
        raise ValueError(f"{job_type}: no batch with all V100 configurations")
    return max(full)


@dataclass(frozen=True)
class GavelFit:
    """Fitted parameters of one Gavel job type and their errors."""

    job_type: str
    batch: int | None
    local_batch: int
    data_parallel: bool
    model: StepModel
    median_rel_error: float
    max_rel_error: float
    num_points: int
    # Informational: the V100-fitted model with a per-GPU-type compute speed on P100 / K80 data.
    transfer_median_rel_error: dict[str, float]
    transfer_num_points: dict[str, int]


def evaluate(model: StepModel, pts: GavelPoints, local_batch: int, compute_speed: float = 1.0) -> np.ndarray:
    """Relative throughput errors of ``model`` on measured points."""
    pred = predict_samples_per_s(model, pts.num_gpus, pts.num_nodes, local_batch, compute_speed)
    return relative_errors(pred, pts.samples_per_s)


def fit_job(
    job_type: str,
    batch: int | None,
    local_batch: int,
    data_parallel: bool,
    gamma: float,
    speed_vs_v100: dict[str, float],
    data_dir: Path = DEFAULT_DATA_DIR,
) -> GavelFit:
    """Fit one job type on its V100 points.

    Also evaluates the transfer of the fitted model, with each GPU type's compute speed, to the
    P100 and K80 multi-GPU points (informational).
    """
    pts = gavel_points(job_type, batch, local_batch, "v100", data_dir)
    one = pts.samples_per_s[pts.num_gpus == 1]
    alpha_c = float(local_batch / one[0])  # seconds per iteration on one V100
    if data_parallel:
        from slamorl_jax.calibration.lsq import fit_log_throughput

        # Gavel has a single two-node point (2 GPUs unconsolidated): the two-node factor is not
        # identifiable from it and stays 1.
        theta0 = np.array(
            [alpha_c, 0.0, 0.2 * alpha_c, 0.05 * alpha_c, 0.5 * alpha_c, 0.05 * alpha_c, gamma, 1.0]
        )
        free = [False, False, True, True, True, True, False, False]
        fit = fit_log_throughput(
            pts.num_gpus,
            pts.num_nodes,
            np.full_like(pts.num_gpus, local_batch),
            pts.samples_per_s,
            theta0,
            free,
        )
        model = StepModel.from_array(fit.theta)
    else:
        model = StepModel(alpha_c, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    err = evaluate(model, pts, local_batch)
    transfer_err: dict[str, float] = {}
    transfer_n: dict[str, int] = {}
    for gpu in ("p100", "k80"):
        other = gavel_points(job_type, batch, local_batch, gpu, data_dir)
        multi = other.num_gpus > 1
        if not data_parallel or not multi.any():
            continue
        sel = GavelPoints(other.num_gpus[multi], other.num_nodes[multi], other.samples_per_s[multi])
        e = evaluate(model, sel, local_batch, speed_vs_v100[gpu.upper()])
        transfer_err[gpu.upper()] = float(np.median(e))
        transfer_n[gpu.upper()] = int(multi.sum())
    return GavelFit(
        job_type=job_type,
        batch=batch,
        local_batch=local_batch,
        data_parallel=data_parallel,
        model=model,
        median_rel_error=float(np.median(err)),
        max_rel_error=float(np.max(err)),
        num_points=len(err),
        transfer_median_rel_error=transfer_err,
        transfer_num_points=transfer_n,
    )
