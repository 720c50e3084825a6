"""The calibrated catalogue: 13 workloads, GPU types, prices and request distributions.

The catalogue is the JSON file written by ``python -m slamorl_jax.calibration`` from the vendored
measurements (see ``docs/calibration.md``). This module reads it once into NumPy arrays; the
environment turns those into traced leaves of :class:`slamorl_jax.env.params.EnvParams`, so a user can
change any calibrated number without recompiling.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
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


def _column(workloads: list[dict], key: str, dtype: type, names: tuple[str, ...]) -> np.ndarray:
    """The workloads' ``key`` as one array (``ValueError`` naming the field, and the workload of
    ``names``, for a value that is not a number of ``dtype``'s range)."""
    return _array([w[key] for w in workloads], dtype, f"workloads' {key}", labels=(names,))


def _array(
    values: object, dtype: type, what: str, ndim: int = 1, labels: tuple[tuple[str, ...], ...] = ()
) -> np.ndarray:
    """``values`` as an ``ndim``-dimensional array of ``dtype``; ``ValueError`` naming ``what`` for a
    value that is not a JSON number (boolean), nests another way or lies outside the dtype's range
    (an int32 epoch count of 1e12, a float32 speed of 1e300, NaN or Infinity), naming where it lies
    by ``labels`` (per axis, the names of its entries; their indices where not given)."""
    try:
        given = np.asarray(values)
        # NumPy would read "0.5" as a number, "false" as True and true as 1.0: JSON numbers only
        # (booleans, or 0 and 1, where the field is a flag).
        flags = dtype is bool and given.dtype.kind in "iu" and bool(np.isin(given, (0, 1)).all())
        wrong_kind = given.dtype.kind not in ("b" if dtype is bool else "iuf") and not flags
        if _holds_bool(values, dtype):
            raise TypeError("got true or false")
        if wrong_kind:
            raise TypeError(f"got {'text' if given.dtype.kind == 'U' else given.dtype}")
        if given.ndim != ndim:
            raise ValueError(f"expected {ndim} level(s) of lists, got {given.ndim}")
        if dtype is not bool:  # checked before the cast, which would wrap an integer or make inf
            _check_range(given.astype(np.float64), np.dtype(dtype), labels)
        array = given.astype(dtype)
    except (OverflowError, TypeError, ValueError) as err:
        kind = "true or false" if dtype is bool else "numbers"
        raise ValueError(f"calibration file's {what} must be {kind} ({err})") from None
    return array


def _check_range(values: np.ndarray, dtype: np.dtype, labels: tuple[tuple[str, ...], ...]) -> None:
    """``OverflowError`` naming the first of ``values`` that ``dtype`` cannot hold (an integer dtype:
    a whole number within its range; a float one: a finite number within its range) and where it
    lies (``labels`` as :func:`_array` takes them)."""
    if np.issubdtype(dtype, np.integer):
        bounds = np.iinfo(dtype)
        beyond = (values != np.round(values)) | ~(values >= bounds.min) | ~(values <= bounds.max)
        reason = f"not an integer within {dtype.name}"
    else:
        with np.errstate(over="ignore"):  # what rounds past the dtype's largest becomes inf, quietly
            beyond = ~np.isfinite(values.astype(dtype))
        reason = f"not a finite {dtype.name}"
    if not beyond.any():
        return
    where = tuple(np.argwhere(beyond)[0]) if beyond.ndim else ()
    at = ", ".join(
        labels[axis][i] if axis < len(labels) and i < len(labels[axis]) else f"entry {i}"
        for axis, i in enumerate(where)
    )
    raise OverflowError(f"{at + ': ' if at else ''}{values[where]:g} is {reason}")


def _holds_bool(values: object, dtype: type) -> bool:
    """Whether a number field's ``values`` hold a JSON boolean anywhere (NumPy reads ``[true, 1.5]``
    as numbers); a flag field's may."""
    if dtype is bool:
        return False
    if isinstance(values, list):
        return any(_holds_bool(v, dtype) for v in values)
    return isinstance(values, bool)


def _check_names(raw: dict) -> None:
    """``ValueError`` unless the file has at least one GPU type, workload and requested GPU count,
    and its GPU types and workloads are named by distinct non-empty strings (a name given twice
    would leave the second unreachable by name)."""
    gpu_types, workloads, bins = raw["gpu_types"], raw["workloads"], raw["requested_gpu_bins"]
    cpus = raw["requested_cpus_per_gpu"] if isinstance(raw["requested_cpus_per_gpu"], dict) else {}
    for key, value in (
        ("gpu_types", gpu_types),
        ("workloads", workloads),
        ("requested_gpu_bins", bins),
        ("requested_cpus_per_gpu values", cpus.get("values")),
        ("requested_cpus_per_gpu probs", cpus.get("probs")),
    ):
        if not isinstance(value, list) or not value:
            raise ValueError(f"calibration file's {key} must be a non-empty list")
    names = [w.get("name") if isinstance(w, dict) else None for w in workloads]
    for what, given in (("GPU type", gpu_types), ("workload name", names)):
        if bad := [n for n in given if not isinstance(n, str) or not n]:
            raise ValueError(f"calibration file's {what}s must be non-empty strings, got {bad[0]!r}")
        if twice := sorted({n for n in given if given.count(n) > 1}):
            raise ValueError(f"calibration file gives the {what} {twice[0]!r} twice")


# What every workload of a calibration file gives (besides its name, speeds and request mix).
WORKLOAD_FIELDS = (
    "samples_per_epoch", "local_batch", "epochs_min", "epochs_max", "data_parallel", "compute_alpha_s",
    "compute_beta_s", "sync_local_alpha_s", "sync_local_beta_s", "sync_node_alpha_s", "sync_node_beta_s",
    "sync_two_node_factor", "gamma", "calibration_intra_node_gbps", "calibration_inter_node_gbps",
    "calibration_cpus_per_gpu", "cpu_c_sat", "cpu_p",
)  # fmt: skip
COLUMN_DTYPES = {"epochs_min": np.int32, "epochs_max": np.int32, "data_parallel": bool}  # else float32


def _check_workloads(workloads: list, gpu_types: tuple[str, ...], num_bins: int) -> None:
    """``ValueError`` naming the workload and what it lacks: a field, a GPU type's speed, or one
    request probability per GPU-count bin."""
    for i, w in enumerate(workloads):
        name = w.get("name", f"#{i}") if isinstance(w, dict) else f"#{i}"
        if not isinstance(w, dict):
            raise ValueError(f"calibration file's workload {name} is not an object")
        missing = [
            key for key in ("name", *WORKLOAD_FIELDS, "compute_speed", "requested_gpu_probs") if key not in w
        ]
        if missing:
            raise ValueError(f"calibration file's workload {name!r} lacks {', '.join(missing)}")
        speeds = [t for t in gpu_types if t not in w["compute_speed"]]
        if speeds:
            raise ValueError(
                f"calibration file's workload {name!r} has no compute_speed for {', '.join(speeds)}"
            )
        if len(w["requested_gpu_probs"]) != num_bins:
            raise ValueError(
                f"calibration file's workload {name!r} gives {len(w['requested_gpu_probs'])} "
                f"requested_gpu_probs for {num_bins} requested_gpu_bins"
            )


def parse_catalog(raw: dict) -> Catalog:
    """Build a :class:`Catalog` from the decoded JSON, checking its format version and that it holds
    what every workload and price needs (``ValueError`` naming what it lacks)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("prices", {}), dict):
        raise ValueError("calibration file must hold one JSON object, its prices an object")
    version = raw.get("format_version")
    if version != SUPPORTED_FORMAT_VERSION:
        raise ValueError(
            f"calibration file format_version={version!r}; this slamorl_jax reads "
            f"version {SUPPORTED_FORMAT_VERSION}"
        )
    for key in ("gpu_types", "workloads", "prices", "requested_gpu_bins", "requested_cpus_per_gpu"):
        if key not in raw:
            raise ValueError(f"calibration file has no {key!r}")
    _check_names(raw)
    gpu_types = tuple(raw["gpu_types"])
    workloads = raw["workloads"]
    _check_workloads(workloads, gpu_types, len(raw["requested_gpu_bins"]))
    prices = raw["prices"]
    missing = [f"gpu_hour of {t}" for t in gpu_types if t not in prices.get("gpu_hour", {})]
    missing += [key for key in ("vcpu_hour", "gib_hour", "reference_code") if key not in prices]
    if missing:
        raise ValueError(f"calibration file's prices lack {', '.join(missing)}")
    ref, cpus = prices["reference_code"], raw["requested_cpus_per_gpu"]
    f32 = np.float32
    names = tuple(w["name"] for w in workloads)
    catalog = Catalog(
        workload_names=names,
        gpu_types=gpu_types,
        requested_gpu_bins=_array(raw["requested_gpu_bins"], np.int32, "requested_gpu_bins"),
        requested_cpus_per_gpu_values=_array(cpus["values"], f32, "requested_cpus_per_gpu values"),
        requested_cpus_per_gpu_probs=_array(cpus["probs"], f32, "requested_cpus_per_gpu probs"),
        gpu_price_per_hour=_array(
            [prices["gpu_hour"][t] for t in gpu_types], f32, "GPU prices", labels=(gpu_types,)
        ),
        vcpu_price_per_hour=float(_array(prices["vcpu_hour"], np.float64, "vcpu_hour price", 0)),
        gib_price_per_hour=float(_array(prices["gib_hour"], np.float64, "gib_hour price", 0)),
        reference_code_prices=tuple(
            float(_array(ref[key], np.float64, f"reference_code {key}", 0))
            for key in ("gpu_hour", "vcpu_hour", "gib_hour")
        ),
        **{key: _column(workloads, key, COLUMN_DTYPES.get(key, f32), names) for key in WORKLOAD_FIELDS},
        compute_speed=_array(
            [[w["compute_speed"][t] for t in gpu_types] for w in workloads],
            f32,
            "compute_speed",
            2,
            labels=(names, gpu_types),
        ),
        requested_gpu_probs=_array(
            [w["requested_gpu_probs"] for w in workloads], f32, "requested_gpu_probs", 2, labels=(names,)
        ),
        raw=raw,
    )
    # load_catalog hands every caller the same cached catalogue: an array written in place would
    # change the params of every env and policy made after it.
    for field in dataclasses.fields(catalog):
        value = getattr(catalog, field.name)
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    return catalog


#: What :func:`parse_catalog` raises for a decoded catalogue it cannot read.
PARSE_ERRORS = (AttributeError, KeyError, TypeError, ValueError)


def catalog_problem(err: Exception) -> str:
    """What :func:`parse_catalog`'s ``err`` says is wrong, for a message that names the catalogue's
    source itself (a file, a checkpoint): without the ``calibration file`` it starts with, and a
    field nested deeper than the checks look (reference prices, ...) as ``lacks 'field'``."""
    if isinstance(err, KeyError):
        return f"lacks {err}"
    return str(err).removeprefix("calibration file ").removeprefix("calibration file's ")


def load_catalog(path: str | os.PathLike | None = None) -> Catalog:
    """Read the calibrated catalogue shipped with the package (or the JSON at ``path``). The file is
    read at every call and parsed once per content: the same :class:`Catalog` comes back while it
    holds the same bytes, and a file written again is parsed anew. ``TypeError`` for anything but a
    path (:func:`parse_catalog` reads a decoded dict)."""
    if path is not None and not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"load_catalog takes a file path, got {type(path).__name__} (parse_catalog reads a dict)"
        )
    file = Path(path) if path is not None else CATALOG_PATH
    try:
        content = file.read_bytes()
    except FileNotFoundError as err:
        remedy = "write one" if path is not None else "regenerate it"
        raise FileNotFoundError(
            f"calibration file {file} is missing; {remedy} with `python -m slamorl_jax.calibration`"
        ) from err
    return _parsed_catalog(str(file), content)


@functools.lru_cache(maxsize=64)
def _parsed_catalog(file: str, content: bytes) -> Catalog:
    """:func:`load_catalog`'s parse of ``file``'s ``content`` (cached by both; a failure is not)."""
    try:
        raw = json.loads(content.decode())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"calibration file {file}: not JSON text ({err})") from None
    try:
        return parse_catalog(raw)
    except PARSE_ERRORS as err:  # named by the file it came from
        raise ValueError(f"calibration file {file}: {catalog_problem(err)}") from None


def catalog_from_flag(path: str, flag: str = "--catalog") -> Catalog:
    """:func:`load_catalog` of ``path`` as a command's ``flag`` gives it: every way it can fail (a
    missing file, a folder, no permission, not JSON, not a catalogue of this version) is one
    ``ValueError`` line naming ``flag``, as is an empty path (an unset shell variable: not the
    shipped catalogue)."""
    if not str(path).strip():
        raise ValueError(f"{flag} must name a calibration file")
    try:
        return load_catalog(path)
    except FileNotFoundError as err:
        raise ValueError(f"{flag}: {err}") from None
    except OSError as err:
        raise ValueError(f"{flag}: cannot read {path} ({err.strerror or err})") from None
    except ValueError as err:
        raise ValueError(f"{flag}: {err}") from None


def catalog_digest(catalog: Catalog) -> str:
    """A SHA-256 of the catalogue's content (its JSON with sorted keys): equal for equal content
    wherever the file lies."""
    return hashlib.sha256(json.dumps(catalog.raw, sort_keys=True).encode()).hexdigest()


def same_catalog(a: Catalog, b: Catalog) -> bool:
    """Whether two catalogues hold the same content (one file read twice, or a copy, counts: what a
    run records is the content, not the path)."""
    return a is b or a.raw == b.raw


def is_shipped(catalog: Catalog) -> bool:
    """Whether ``catalog`` holds what the catalogue shipped with the package holds."""
    return same_catalog(catalog, load_catalog())


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


def job_figures(catalog: Catalog, workload: str, gpu_type: str) -> dict[str, float]:
    """The figures of ``catalog`` that shape a job of ``workload`` on ``gpu_type`` GPUs, prices
    apart (``prices.price_figures``): its workload's :data:`WORKLOAD_FIELDS` (epochs, compute and
    sync model, CPU sensitivity) and the GPU type's speed on it (``ValueError`` for a name the
    catalogue lacks)."""
    w, t = workload_index(workload, catalog), gpu_type_index(gpu_type, catalog)
    return {
        **{name: float(getattr(catalog, name)[w]) for name in WORKLOAD_FIELDS},
        "compute_speed": float(catalog.compute_speed[w, t]),
    }
