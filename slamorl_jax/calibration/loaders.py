"""Readers for the vendored measurement files (standard library + NumPy only, no pandas, no SciPy).

Every reader takes the data directory (default :data:`DEFAULT_DATA_DIR`, the copy shipped inside the
package) so a fresh clone can recalibrate from the files in the repository, and returns plain NumPy
arrays or small dataclasses.
"""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from slamorl_jax.env.catalog import CATALOG_PATH

#: The vendored copies of the published measurements (see ``data/README.md``).
DEFAULT_DATA_DIR = Path(__file__).resolve().parent / "data"
#: Where ``python -m slamorl_jax.calibration`` writes its fits: the JSON the environment loads.
DEFAULT_OUTPUT = CATALOG_PATH

POLLUX_APPS: tuple[str, ...] = ("cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf")


def _rows(path: Path) -> list[dict[str, str]]:
    """All non-empty rows of a CSV file with a header line (``ValueError`` for a file without any:
    a header alone would leave a fit with nothing, and its report with NaN)."""
    with path.open(newline="") as f:
        rows = [row for row in csv.DictReader(f) if any((v or "").strip() for v in row.values())]
    if not rows:
        raise ValueError(f"{path}: no rows of data")
    return rows


MIN_SECONDS = 1e-9  # the least step time a measurement may hold (a 0 s step divides by zero)
MIN_POSITIVE = 1e-9  # the least a throughput or price may be where 0 or less has no meaning


def _checked(values: np.ndarray, path: Path, what: str, least: float) -> np.ndarray:
    """``values`` when every one is finite and at least ``least``, else ``ValueError`` naming ``path``
    and ``what`` (a damaged or edited data file must not silently change the fits)."""
    bad = ~(np.isfinite(values) & (values >= least))
    if values.size == 0 or bad.any():
        found = "no values" if values.size == 0 else f"{float(values[bad][0]):g}"
        raise ValueError(f"{path}: every {what} must be a finite number >= {least:g}, found {found}")
    return values


@dataclass(frozen=True)
class StepTimes:
    """Measured step times of one Pollux application (rows of one or both trace files)."""

    num_gpus: np.ndarray  # replicas (GPUs)
    num_nodes: np.ndarray  # nodes spanned
    local_batch: np.ndarray  # per-GPU batch (samples)
    step_time: np.ndarray  # seconds per optimiser step
    sync_time: np.ndarray  # seconds of the all-reduce part
    source: np.ndarray  # "placements" or "scalability" per row
    placement: np.ndarray  # placement string (digits = GPUs per node); "" for scalability rows

    @property
    def samples_per_s(self) -> np.ndarray:
        """Measured throughput ``num_gpus * local_batch / step_time``."""
        return self.num_gpus * self.local_batch / self.step_time

    def select(self, mask: np.ndarray) -> StepTimes:
        """The rows where ``mask`` is true."""
        return StepTimes(**{k: getattr(self, k)[mask] for k in self.__dataclass_fields__})

    def __len__(self) -> int:
        return int(self.num_gpus.shape[0])


@lru_cache(maxsize=32)
def load_pollux_step_times(app: str, data_dir: Path = DEFAULT_DATA_DIR) -> StepTimes:
    """All rows of ``placements.csv`` and ``scalability.csv`` of one Pollux application.

    Placement digits are the GPUs used on each node: replicas = digit sum, nodes = number of digits.
    """
    root = Path(data_dir) / "pollux-osdi21" / "traces" / app
    gpus, nodes, batch, step, sync, source, placement = [], [], [], [], [], [], []
    for row in _rows(root / "placements.csv"):
        digits = row["placement"].strip()
        gpus.append(sum(int(d) for d in digits))
        nodes.append(len(digits))
        batch.append(float(row["local_bsz"]))
        step.append(float(row["step_time"]))
        sync.append(float(row["sync_time"]))
        source.append("placements")
        placement.append(digits)
    for row in _rows(root / "scalability.csv"):
        gpus.append(int(row["num_replicas"]))
        nodes.append(int(row["num_nodes"]))
        batch.append(float(row["local_bsz"]))
        step.append(float(row["step_time"]))
        sync.append(float(row["sync_time"]))
        source.append("scalability")
        placement.append("")
    where = root / "{placements,scalability}.csv"
    return StepTimes(  # checked as the other loaders check theirs: an edited file must not fit NaN
        num_gpus=_checked(np.asarray(gpus, dtype=np.float64), where, "GPU count", 1),
        num_nodes=_checked(np.asarray(nodes, dtype=np.float64), where, "node count", 1),
        local_batch=_checked(np.asarray(batch, dtype=np.float64), where, "local_bsz", 1),
        step_time=_checked(np.asarray(step, dtype=np.float64), where, "step_time", MIN_SECONDS),
        sync_time=_checked(np.asarray(sync, dtype=np.float64), where, "sync_time", 0),
        source=np.asarray(source),
        placement=np.asarray(placement),
    )


@dataclass(frozen=True)
class ValidationTrace:
    """One ``validation-<M>.csv`` file: a real training run at global batch ``global_batch``."""

    global_batch: int
    iteration: np.ndarray  # cumulative optimiser steps at the end of each epoch

    @property
    def num_epochs(self) -> int:
        """Epochs the run lasted (one row per epoch)."""
        return int(self.iteration.shape[0])


def load_pollux_validation(app: str, data_dir: Path = DEFAULT_DATA_DIR) -> list[ValidationTrace]:
    """The validation traces of one Pollux application, sorted by global batch."""
    root = Path(data_dir) / "pollux-osdi21" / "traces" / app
    traces = []
    for path in root.glob("validation-*.csv"):
        m = int(path.stem.split("-", 1)[1])
        it = np.asarray([float(r["iteration"]) for r in _rows(path)], dtype=np.float64)
        traces.append(ValidationTrace(global_batch=m, iteration=_checked(it, path, "iteration", 0.0)))
    return sorted(traces, key=lambda t: t.global_batch)


def load_pollux_requested_replicas(data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, np.ndarray]:
    """``num_replicas`` a user asked for, per application, over all ``workloads/workload-*.csv``."""
    out: dict[str, list[int]] = {}
    for path in sorted((Path(data_dir) / "pollux-osdi21" / "workloads").glob("workload-*.csv")):
        for row in _rows(path):
            out.setdefault(row["application"], []).append(int(row["num_replicas"]))
    return {
        k: _checked(
            np.asarray(v, dtype=np.int64), Path(data_dir) / "pollux-osdi21" / "workloads", "num_replicas", 1
        )
        for k, v in sorted(out.items())
    }


def load_philly_num_gpus(data_dir: Path = DEFAULT_DATA_DIR) -> np.ndarray:
    """Requested GPUs of every job in the Philly-derived trace (``traces/philly.csv``)."""
    path = Path(data_dir) / "pollux-osdi21" / "traces" / "philly.csv"
    gpus = np.asarray([float(r["num_gpus"]) for r in _rows(path)], dtype=np.float64)
    return _checked(gpus, path, "num_gpus", 1).astype(np.int64)


@lru_cache(maxsize=4)
def load_gavel_isolated(data_dir: Path = DEFAULT_DATA_DIR) -> dict[tuple[str, str, int], float]:
    """Isolated Gavel throughputs ``{(worker_type, job_type, scale_factor): iterations/s}``.

    ``worker_type`` keeps Gavel's names (``v100``, ``v100_unconsolidated``, ...). The value is
    training iterations per second summed over the ``scale_factor`` workers; 0.0 = failed run.
    """
    path = Path(data_dir) / "gavel-osdi20" / "simulation_throughputs.json"
    raw = json.loads(path.read_text())
    out: dict[tuple[str, str, int], float] = {}
    for worker_type, jobs in raw.items():
        for key, entry in jobs.items():
            job_type, scale_factor = ast.literal_eval(key)
            out[(worker_type, str(job_type), int(scale_factor))] = float(entry["null"])
    _checked(np.asarray(list(out.values()), np.float64), path, "throughput", 0.0)  # 0.0: a failed run
    return out


#: The memory level (GB per GPU) at which the CPU profiles are read (``cpu_profiles``): Synergy's
#: GPU-proportional share of a server's memory (500 GB over 8 GPUs; the data's README).
SYNERGY_MEM_GB_PER_GPU = 62.5


def load_synergy_cpu_profiles(
    data_dir: Path = DEFAULT_DATA_DIR, mem_gb_per_gpu: float = SYNERGY_MEM_GB_PER_GPU
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Synergy's normalised throughput vs CPUs per GPU at one memory level, per model.

    Returns ``{model: (cpus_per_gpu, normalized_throughput)}`` sorted by CPUs.
    """
    path = Path(data_dir) / "synergy-osdi22" / "cpu_mem_sensitivity.csv"
    acc: dict[str, list[tuple[float, float]]] = {}
    for row in _rows(path):
        if abs(float(row["mem_gb_per_gpu"]) - mem_gb_per_gpu) > 1e-9:
            continue
        acc.setdefault(row["model"], []).append(
            (float(row["cpus_per_gpu"]), float(row["normalized_throughput"]))
        )
    if not acc:
        raise ValueError(f"{path}: no rows at {mem_gb_per_gpu:g} GB of memory per GPU")
    out = {}
    for model, pairs in sorted(acc.items()):
        pairs.sort()
        out[model] = (
            _checked(np.asarray([p[0] for p in pairs], dtype=np.float64), path, "cpus_per_gpu", 0.0),
            _checked(
                np.asarray([p[1] for p in pairs], dtype=np.float64),
                path,
                "normalized_throughput",
                MIN_POSITIVE,
            ),
        )
    return out


@dataclass(frozen=True)
class InstancePrice:
    """One row of the AWS price table."""

    instance_type: str
    accelerator: str  # "" for CPU-only instances
    accelerator_count: int
    vcpus: float
    memory_gib: float
    price_per_hour: float  # on-demand USD
    spot_price_per_hour: float | None = None  # USD; None where the row has none


#: The vendored AWS price table, relative to the data folder.
AWS_PRICE_FILE = Path("aws-ec2-prices") / "aws_gpu_instances_us_east_1.csv"


def load_aws_prices(data_dir: Path = DEFAULT_DATA_DIR) -> list[InstancePrice]:
    """On-demand (and, where given, spot) prices of the vendored AWS instance rows."""
    path = Path(data_dir) / AWS_PRICE_FILE
    out = []
    for row in _rows(path):
        count = row["AcceleratorCount"].strip()
        spot = (row.get("SpotPrice") or "").strip()
        out.append(
            InstancePrice(
                instance_type=row["InstanceType"],
                accelerator=row["AcceleratorName"].strip(),
                accelerator_count=int(float(count)) if count else 0,
                vcpus=float(row["vCPUs"]),
                memory_gib=float(row["MemoryGiB"]),
                price_per_hour=float(row["Price"]),
                spot_price_per_hour=float(spot) if spot else None,
            )
        )
    # Checked as the other files are: a price at or below 0 fits negative unit prices (exit 0).
    _checked(np.asarray([r.price_per_hour for r in out]), path, "Price", MIN_POSITIVE)
    _checked(np.asarray([r.vcpus for r in out]), path, "vCPUs", 1.0)
    _checked(np.asarray([r.memory_gib for r in out]), path, "MemoryGiB", MIN_POSITIVE)
    _checked(np.asarray([r.accelerator_count for r in out], np.float64), path, "AcceleratorCount", 0.0)
    spots = [r.spot_price_per_hour for r in out if r.spot_price_per_hour is not None]
    if spots:
        _checked(np.asarray(spots), path, "SpotPrice", MIN_POSITIVE)
    return out


def load_alibaba_cpus_per_gpu(data_dir: Path = DEFAULT_DATA_DIR) -> np.ndarray:
    """Requested CPUs per GPU of the Alibaba tasks with at least one GPU.

    ``cpu_milli / 1000 / num_gpu``; GPU-sharing tasks (``gpu_milli < 1000``) count as one GPU.
    """
    path = Path(data_dir) / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"
    vals = []
    for row in _rows(path):
        num_gpu = int(row["num_gpu"])
        if num_gpu >= 1:
            vals.append(float(row["cpu_milli"]) / 1000.0 / num_gpu)
    return _checked(np.asarray(vals, dtype=np.float64), path, "cpu_milli", 0.0)
