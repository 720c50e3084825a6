"""The calibrated catalogue: 13 workloads, GPU types, prices and request distributions.

The catalogue is the JSON file written by ``python -m slamorl_jax.calibration`` from the vendored
measurements (see ``docs/calibration.md``). This module reads it once into NumPy arrays; the
environment turns those into traced leaves of :class:`slamorl_jax.env.params.EnvParams`, so a user can
change any calibrated number without recompiling.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import numpy as np

CATALOG_PATH = Path(__file__).with_name("calibrated_workloads.json")
SUPPORTED_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Catalog:
    """Calibrated constants, one row per workload (index order = ``workload_names``)."""

    workload_names: tuple[str, ...]
    gpu_types: tuple[str, ...]
    requested_gpu_bins: np.ndarray  # (B,) GPU counts users ask for
    requested_cpus_per_gpu_values: np.ndarray  # (R,)
    requested_cpus_per_gpu_probs: np.ndarray  # (R,)
    gpu_price_per_hour: np.ndarray  # (T,) AWS-derived $/GPU-h by GPU type
    vcpu_price_per_hour: float
    gib_price_per_hour: float
    reference_code_prices: tuple[float, float, float]  # $/GPU-h, $/vCPU-h, $/GiB-h
    # Per-workload arrays, shape (W,) unless noted.
    samples_per_epoch: np.ndarray
    local_batch: np.ndarray
    epochs_min: np.ndarray
    epochs_max: np.ndarray
    data_parallel: np.ndarray  # bool
    compute_alpha_s: np.ndarray
    compute_beta_s: np.ndarray
    sync_local_alpha_s: np.ndarray
    sync_local_beta_s: np.ndarray
    sync_node_alpha_s: np.ndarray
    sync_node_beta_s: np.ndarray
    sync_two_node_factor: np.ndarray
    gamma: np.ndarray
    calibration_intra_node_gbps: np.ndarray
    calibration_inter_node_gbps: np.ndarray
    calibration_cpus_per_gpu: np.ndarray
    compute_speed: np.ndarray  # (W, T) relative to the workload's calibration GPU
    cpu_c_sat: np.ndarray
    cpu_p: np.ndarray
    requested_gpu_probs: np.ndarray  # (W, B)
    raw: dict = dataclasses.field(repr=False, compare=False, default_factory=dict)

    @property
    def num_workloads(self) -> int:
        """Number of calibrated workloads."""
        return len(self.workload_names)

    @property
    def num_gpu_types(self) -> int:
        """Number of GPU types with calibrated speeds and prices."""
        return len(self.gpu_types)


def _column(workloads: list[dict], key: str, dtype: type) -> np.ndarray:
    return np.asarray([w[key] for w in workloads], dtype=dtype)


def parse_catalog(raw: dict) -> Catalog:
    """Build a :class:`Catalog` from the decoded JSON, checking its format version."""
    version = raw.get("format_version")
    if version != SUPPORTED_FORMAT_VERSION:
        raise ValueError(
            f"calibration file format_version={version!r}; this slamorl_jax reads "
            f"version {SUPPORTED_FORMAT_VERSION}"
        )
    gpu_types = tuple(raw["gpu_types"])
    workloads = raw["workloads"]
    prices = raw["prices"]
    ref = prices["reference_code"]
    f32 = np.float32
    catalog = Catalog(
        workload_names=tuple(w["name"] for w in workloads),
        gpu_types=gpu_types,
        requested_gpu_bins=np.asarray(raw["requested_gpu_bins"], dtype=np.int32),
        requested_cpus_per_gpu_values=np.asarray(raw["requested_cpus_per_gpu"]["values"], dtype=f32),
        requested_cpus_per_gpu_probs=np.asarray(raw["requested_cpus_per_gpu"]["probs"], dtype=f32),
        gpu_price_per_hour=np.asarray([prices["gpu_hour"][t] for t in gpu_types], dtype=f32),
        vcpu_price_per_hour=float(prices["vcpu_hour"]),
        gib_price_per_hour=float(prices["gib_hour"]),
        reference_code_prices=(
            float(ref["gpu_hour"]),
            float(ref["vcpu_hour"]),
            float(ref["gib_hour"]),
        ),
        samples_per_epoch=_column(workloads, "samples_per_epoch", f32),
        local_batch=_column(workloads, "local_batch", f32),
        epochs_min=_column(workloads, "epochs_min", np.int32),
        epochs_max=_column(workloads, "epochs_max", np.int32),
        data_parallel=_column(workloads, "data_parallel", bool),
        compute_alpha_s=_column(workloads, "compute_alpha_s", f32),
        compute_beta_s=_column(workloads, "compute_beta_s", f32),
        sync_local_alpha_s=_column(workloads, "sync_local_alpha_s", f32),
        sync_local_beta_s=_column(workloads, "sync_local_beta_s", f32),
        sync_node_alpha_s=_column(workloads, "sync_node_alpha_s", f32),
        sync_node_beta_s=_column(workloads, "sync_node_beta_s", f32),
        sync_two_node_factor=_column(workloads, "sync_two_node_factor", f32),
        gamma=_column(workloads, "gamma", f32),
        calibration_intra_node_gbps=_column(workloads, "calibration_intra_node_gbps", f32),
        calibration_inter_node_gbps=_column(workloads, "calibration_inter_node_gbps", f32),
        calibration_cpus_per_gpu=_column(workloads, "calibration_cpus_per_gpu", f32),
        compute_speed=np.asarray([[w["compute_speed"][t] for t in gpu_types] for w in workloads], dtype=f32),
        cpu_c_sat=_column(workloads, "cpu_c_sat", f32),
        cpu_p=_column(workloads, "cpu_p", f32),
        requested_gpu_probs=np.asarray([w["requested_gpu_probs"] for w in workloads], dtype=f32),
        raw=raw,
    )
    # load_catalog hands every caller the same cached catalogue: an array written in place would
    # change the params of every env and policy made after it.
    for field in dataclasses.fields(catalog):
        value = getattr(catalog, field.name)
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    return catalog


@functools.cache
def load_catalog(path: str | None = None) -> Catalog:
    """Read the calibrated catalogue shipped with the package (or the JSON at ``path``)."""
    file = Path(path) if path is not None else CATALOG_PATH
    try:
        raw = json.loads(file.read_text())
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f"calibration file {file} is missing; regenerate it with `python -m slamorl_jax.calibration`"
        ) from err
    return parse_catalog(raw)


def workload_index(name: str, catalog: Catalog | None = None) -> int:
    """Index of a workload by name; a clear ``ValueError`` lists the valid names."""
    names = (catalog or load_catalog()).workload_names
    if name not in names:
        raise ValueError(f"unknown workload {name!r}; choose one of: {', '.join(names)}")
    return names.index(name)


def gpu_type_index(name: str, catalog: Catalog | None = None) -> int:
    """Index of a GPU type by name; a clear ``ValueError`` lists the valid names."""
    types = (catalog or load_catalog()).gpu_types
    if name not in types:
        raise ValueError(f"unknown GPU type {name!r}; choose one of: {', '.join(types)}")
    return types.index(name)
