"""Re-check a calibrated JSON against the vendored measurements (NumPy + JAX only, no SciPy).

The tests use these helpers to recompute every error from the shipped parameters through
:mod:`slamorl_jax.env.throughput`, independently of the numbers stored in the JSON's ``fit`` field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from slamorl_jax.calibration import gavel_fit, pollux_fit
from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR, DEFAULT_OUTPUT, load_pollux_step_times
from slamorl_jax.calibration.model import StepModel
from slamorl_jax.calibration.workloads import WORKLOADS_BY_NAME


def load_shipped(path: Path = DEFAULT_OUTPUT) -> dict[str, Any]:
    """The calibrated JSON shipped with the package (or the one at ``path``)."""
    return json.loads(Path(path).read_text())


def pollux_rel_errors(entry: dict[str, Any], data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, np.ndarray]:
    """Relative throughput errors of a Pollux workload entry.

    Keys: ``all``, ``placements`` (placements.csv rows), ``scalability`` (scalability.csv rows).
    """
    spec = WORKLOADS_BY_NAME[entry["name"]]
    d = load_pollux_step_times(spec.key, data_dir)
    err = pollux_fit.evaluate(StepModel.from_mapping(entry), d)
    is_pl = d.source == "placements"
    return {"all": err, "placements": err[is_pl], "scalability": err[~is_pl]}


def gavel_job_batch(entry: dict[str, Any]) -> int | None:
    """The batch in the Gavel job name of a Gavel workload entry (None for A3C / CycleGAN)."""
    spec = WORKLOADS_BY_NAME[entry["name"]]
    return None if spec.unbatched_local_batch is not None else int(entry["local_batch"])


def gavel_rel_errors(entry: dict[str, Any], data_dir: Path = DEFAULT_DATA_DIR) -> np.ndarray:
    """Relative throughput errors of a Gavel workload entry on its measured V100 configurations."""
    spec = WORKLOADS_BY_NAME[entry["name"]]
    pts = gavel_fit.gavel_points(
        spec.key, gavel_job_batch(entry), int(entry["local_batch"]), "v100", data_dir
    )
    return gavel_fit.evaluate(StepModel.from_mapping(entry), pts, int(entry["local_batch"]))
