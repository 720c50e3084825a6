"""Fit the Pollux step-time model to the measured T4 step times of one Pollux application.

Data: ``pollux-osdi21/traces/<app>/placements.csv`` (1-4 nodes, 1-16 GPUs) and ``scalability.csv``
(6-16 nodes, 6-64 GPUs), every row (all per-GPU batches). The 8 parameters of
:mod:`slamorl_jax.env.throughput` are fitted by least squares on log throughput; the measured
``sync_time`` and ``step_time - sync_time`` only give the starting point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slamorl_jax.calibration.loaders import (
    DEFAULT_DATA_DIR,
    StepTimes,
    load_pollux_step_times,
    load_pollux_validation,
)
from slamorl_jax.calibration.model import StepModel, predict_samples_per_s, relative_errors

#: A per-GPU batch counts as "measured on most placements" when it has rows for at least this
#: fraction of the distinct (placement or node/GPU count) configurations of the app.
MIN_COVERAGE = 0.95


@dataclass(frozen=True)
class PolluxFit:
    """Fitted parameters of one Pollux application and their errors on the measured data."""

    app: str
    model: StepModel
    local_batch: int
    median_rel_error: float
    max_rel_error: float
    num_points: int
    median_rel_error_placements: float
    median_rel_error_scalability: float
    num_placements_rows: int
    num_scalability_rows: int


def _initial_guess(d: StepTimes) -> np.ndarray:
    """Start values from the measured compute (step - sync) and sync times."""
    comp = d.step_time - d.sync_time
    a = np.stack([np.ones_like(d.local_batch), d.local_batch], axis=1)
    (alpha_c, beta_c), *_ = np.linalg.lstsq(a, comp, rcond=None)
    theta = np.array([max(alpha_c, 1e-4), max(beta_c, 1e-7), 0.0, 0.0, 0.0, 0.0, 1.0, 1.5])
    for j, multi in ((2, False), (4, True)):
        mask = (d.num_gpus > 1) & ((d.num_nodes > 1) == multi)
        if mask.sum() >= 2:
            b = np.stack([np.ones(mask.sum()), d.num_gpus[mask] - 2.0], axis=1)
            (alpha, beta), *_ = np.linalg.lstsq(b, d.sync_time[mask], rcond=None)
            theta[j], theta[j + 1] = max(alpha, 1e-5), max(beta, 1e-7)
    return theta


def choose_local_batch(app: str, data_dir: Path = DEFAULT_DATA_DIR) -> int:
    """The representative per-GPU batch of an app.

    Among the per-GPU batches measured on at least :data:`MIN_COVERAGE` of the app's distinct
    configurations (placements plus node/GPU counts of the scalability runs), take the one
    closest in log scale to the smallest global batch of the app's validation traces (the batch of
    the reference training run, which fits on one GPU); ties go to the smaller batch.
    """
    d = load_pollux_step_times(app, data_dir)
    configs = {
        (s, p, int(k), int(n))
        for s, p, k, n in zip(d.source, d.placement, d.num_gpus, d.num_nodes, strict=True)
    }
    target = min(t.global_batch for t in load_pollux_validation(app, data_dir))
    candidates = []
    for m in np.unique(d.local_batch):
        rows = d.select(d.local_batch == m)
        covered = {
            (s, p, int(k), int(n))
            for s, p, k, n in zip(rows.source, rows.placement, rows.num_gpus, rows.num_nodes, strict=True)
        }
        if len(covered) >= MIN_COVERAGE * len(configs):
            candidates.append(int(m))
    return min(candidates, key=lambda m: (abs(np.log(m / target)), m))


def evaluate(model: StepModel, d: StepTimes) -> np.ndarray:
    """Relative throughput error of ``model`` at every row of ``d``."""
    pred = predict_samples_per_s(model, d.num_gpus, d.num_nodes, d.local_batch)
    return relative_errors(pred, d.samples_per_s)


def fit_app(app: str, data_dir: Path = DEFAULT_DATA_DIR) -> PolluxFit:
    """Fit all 8 parameters of one app on all its measured rows (SciPy needed)."""
    from slamorl_jax.calibration.lsq import fit_log_throughput

    d = load_pollux_step_times(app, data_dir)
    theta0 = _initial_guess(d)
    fit = fit_log_throughput(d.num_gpus, d.num_nodes, d.local_batch, d.samples_per_s, theta0, free=[True] * 8)
    model = StepModel.from_array(fit.theta)
    err = evaluate(model, d)
    is_pl = d.source == "placements"
    return PolluxFit(
        app=app,
        model=model,
        local_batch=choose_local_batch(app, data_dir),
        median_rel_error=float(np.median(err)),
        max_rel_error=float(np.max(err)),
        num_points=len(d),
        median_rel_error_placements=float(np.median(err[is_pl])),
        median_rel_error_scalability=float(np.median(err[~is_pl])),
        num_placements_rows=int(is_pl.sum()),
        num_scalability_rows=int((~is_pl).sum()),
    )


def trace_samples_per_epoch(app: str, data_dir: Path = DEFAULT_DATA_DIR) -> int:
    """Samples per epoch implied by the app's validation trace at its smallest global batch.

    Median optimiser steps per epoch times the global batch: an upper bound on the dataset size
    within one batch (the last batch of an epoch may be partial). A cross-check of the documented
    dataset sizes.
    """
    trace = load_pollux_validation(app, data_dir)[0]
    steps = np.diff(np.concatenate([[0.0], trace.iteration]))
    return int(np.median(steps) * trace.global_batch)
