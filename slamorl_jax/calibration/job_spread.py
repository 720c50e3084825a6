"""Size the hidden per-job deviations of the true throughput constants from the profile, from the data.

A job's true compute time is ``T_comp x exp(sigma_compute z1)`` and every sync term is scaled by
``exp(sigma_sync z2)`` (``env/job_truth.py``). Rules (docs/calibration.md, "Per-job deviation"):

* ``sigma_compute``: RMS over the (workload, GPU type) cells, equal weights (the default job mix),
  of the log error of the profile's 1-GPU speed in the cell: repeat noise where it was measured
  (for ResNet-18 and ResNet-50, in either study), the spread of the shared T4/V100, K80/V100,
  P100/V100 ratios where one is used (errors add in variance);
* ``sigma_sync``: median over the data-parallel fits of the robust spread of the sync deviation
  implied by a multi-GPU residual, ``log(predicted / measured samples/s) / s`` with the elasticity
  ``s = (T_sync / T_step) ** gamma >= MIN_SYNC_SHARE``.

Robust spread = 1.4826 x median absolute deviation from the median; both sigmas rounded to 2
decimals. ``python -m slamorl_jax.calibration.job_spread [--data-dir DIR] [--calibrated JSON]``
prints the evidence (bad input: one line, exit status 2). NumPy + JAX only.
"""

from __future__ import annotations

import csv
import json
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slamorl_jax.cli_start import program_name, require_backend  # before JAX, NumPy: quiet Ctrl-C
from slamorl_jax.markdown import markdown_table

require_backend()  # run as a program: a platform the machine lacks is one line, before the env's imports
# ruff: noqa: E402  (the imports below start JAX's backend)
import jax
import jax.numpy as jnp
import numpy as np

from slamorl_jax.calibration import gavel_fit, gpu_speed
from slamorl_jax.calibration.loaders import (
    DEFAULT_DATA_DIR,
    DEFAULT_OUTPUT,
    POLLUX_APPS,
    load_gavel_isolated,
    load_pollux_step_times,
)
from slamorl_jax.calibration.model import StepModel, samples_per_s_jax
from slamorl_jax.calibration.workloads import WORKLOADS_BY_NAME
from slamorl_jax.cli_args import OneLineArgumentParser, fail, first_line, run_command, summary
from slamorl_jax.env import throughput

PROG = program_name("slamorl_jax.calibration.job_spread")  # as started: -m or its script

#: 1.4826 x MAD estimates the standard deviation of a normal sample.
MAD_TO_SD = 1.4826
#: A multi-GPU point counts for the sync spread only where the sync elasticity is at least this.
MIN_SYNC_SHARE = 0.25


def robust_sd(x: Any) -> float:
    """``1.4826 x median(|x - median(x)|)``: a standard deviation robust to outliers."""
    x = np.asarray(x, dtype=np.float64)
    return float(MAD_TO_SD * np.median(np.abs(x - np.median(x))))


@dataclass(frozen=True)
class JobSpread:
    """The chosen spreads and their evidence; every spread is a standard deviation of natural logs."""

    sigma_compute: float  # chosen spread of the per-job compute-time factor (2 decimals)
    sigma_sync: float  # chosen spread of the per-job factor on all sync terms (2 decimals)
    compute_rms: float  # unrounded cell RMS behind sigma_compute
    sync_median: float  # unrounded median behind sigma_sync
    num_gavel_job_types: int  # Gavel (model, batch) types with 1-GPU K80, P100 and V100 runs
    k80_ratio: tuple[float, float]  # (robust, plain ddof=1) spread of log(K80/V100) over those types
    p100_ratio: tuple[float, float]  # the same for log(P100/V100)
    t4_ratios: tuple[tuple[str, float], ...]  # (Gavel job type, T4/V100 ratio) of the shared models
    t4_ratio_rms: float  # RMS log deviation of those ratios from their geometric mean
    num_repeat_groups: int  # Pollux (placement up to node order, batch) groups measured 2+ times
    repeat_compute: float  # robust spread of log(step - sync time) within those groups
    repeat_step: float  # robust spread of log(step time) within those groups
    sync_per_fit: tuple[tuple[str, float, int], ...]  # (workload, robust spread, points used)
    sync_pooled: float  # robust spread of the implied sync deviations of all fits pooled
    sync_transfer: tuple[float, int]  # (robust spread, points) on Gavel's P100 / K80 points


def gavel_log_ratios(data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, np.ndarray]:
    """``log(gpu / V100)`` of the 1-GPU throughput of every Gavel job type, for ``k80`` and ``p100``."""
    iso = load_gavel_isolated(data_dir)
    jobs = [j for (w, j, s) in sorted(iso) if w == "v100" and s == 1]
    jobs = [j for j in jobs if min(iso.get((g, j, 1), 0.0) for g in ("k80", "p100")) > 0.0]
    return {g: np.log([iso[(g, j, 1)] / iso[("v100", j, 1)] for j in jobs]) for g in ("k80", "p100")}


def repeat_spreads(data_dir: Path = DEFAULT_DATA_DIR) -> tuple[float, float, int]:
    """Robust log spreads of compute (step - sync) and step time among repeated Pollux measurements.

    Repeats: placements that differ only in node order ("123", "132") at the same per-GPU batch. A
    deviation from the group mean is scaled by ``sqrt(n / (n - 1))`` to estimate one run's spread.
    Returns (compute spread, step spread, number of groups).
    """
    comp: list[float] = []
    step: list[float] = []
    groups = 0
    for app in POLLUX_APPS:
        d = load_pollux_step_times(app, data_dir)
        rows: dict[tuple[str, float], list[int]] = defaultdict(list)
        for i, (p, b) in enumerate(zip(d.placement, d.local_batch, strict=True)):
            if p and d.step_time[i] > d.sync_time[i]:
                rows[("".join(sorted(p)), float(b))].append(i)
        for idx in (v for v in rows.values() if len(v) > 1):
            groups += 1
            scale = np.sqrt(len(idx) / (len(idx) - 1))
            for out, x in ((comp, d.step_time[idx] - d.sync_time[idx]), (step, d.step_time[idx])):
                out.extend(scale * (np.log(x) - np.log(x).mean()))
    return robust_sd(comp), robust_sd(step), groups


@jax.jit
def _predict_and_elasticity(
    theta: jax.Array, k: jax.Array, n: jax.Array, m: jax.Array, speed: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Model samples/s and ``(T_sync / T_step) ** gamma``; ``theta`` is (8, points), PARAM_NAMES order."""
    t_comp = throughput.compute_time(theta[0], theta[1], m) / speed
    t_sync = throughput.sync_time(k, n, theta[2], theta[3], theta[4], theta[5], two_node_factor=theta[7])
    t_step = throughput.step_time(t_comp, t_sync, theta[6])
    return samples_per_s_jax(theta, k, n, m, speed), throughput.positive_power(t_sync / t_step, theta[6])


def sync_deviations(shipped: dict[str, Any], data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, np.ndarray]:
    """Implied sync deviations at the multi-GPU points with elasticity ``>= MIN_SYNC_SHARE``.

    One entry per data-parallel fit (its own data) plus ``"transfer"``: Gavel's P100 / K80 points
    under the V100 fit, compute divided by the job's measured 1-GPU speed ratio.
    """
    groups, cols = [], []  # cols: theta, GPUs, nodes, per-GPU batch, speed, measured samples/s
    for w in (w for w in shipped["workloads"] if w["data_parallel"]):
        spec, theta, b = (
            WORKLOADS_BY_NAME[w["name"]],
            StepModel.from_mapping(w).as_array(),
            int(w["local_batch"]),
        )
        if spec.source == "pollux":
            d = load_pollux_step_times(spec.key, data_dir)
            d = d.select(d.num_gpus > 1)
            sets = [(w["name"], d.num_gpus, d.num_nodes, d.local_batch, 1.0, d.samples_per_s)]
        else:
            sets = []
            for gpu in ("v100", "p100", "k80"):
                p = gavel_fit.gavel_points(spec.key, b, b, gpu, data_dir)
                k = p.num_gpus > 1
                name, speed = (w["name"] if gpu == "v100" else "transfer"), w["compute_speed"][gpu.upper()]
                sets.append((name, p.num_gpus[k], p.num_nodes[k], b, speed, p.samples_per_s[k]))
        for name, k, n, m, speed, measured in sets:
            groups += [name] * len(k)
            cols.append([np.tile(theta[:, None], len(k)), k, n, m + 0 * k, speed + 0 * k, measured])
    theta, k, n, m, speed, measured = (np.concatenate(c, axis=-1) for c in zip(*cols, strict=True))
    with jax.enable_x64(True):
        pred, s = map(np.asarray, _predict_and_elasticity(*map(jnp.asarray, (theta, k, n, m, speed))))
    dev, keep, names = np.log(pred / measured) / s, s >= MIN_SYNC_SHARE, np.asarray(groups)
    return {g: dev[keep & (names == g)] for g in dict.fromkeys(groups)}


def compute_cell_rms(
    n_pollux: int,
    n_gavel: int,
    k80: float,
    p100: float,
    t4: float,
    rep: float,
    shared: tuple[int, int] = (0, 0),
) -> float:
    """RMS log error of the profile's 1-GPU speed over the (workload, GPU type) cells, equal weights.

    Pollux (T4-calibrated): T4 measured; K80 and P100 = Gavel median ratio / (T4/V100); V100 via
    T4/V100. Gavel (V100-calibrated): V100, K80, P100 measured; T4 via T4/V100. ``shared`` counts the
    Pollux and the Gavel workloads (included in ``n_pollux``, ``n_gavel``) whose model both studies
    measured: every cell of theirs is that model's own measurement (repeat noise ``rep``).
    """
    if not (0 <= shared[0] <= n_pollux and 0 <= shared[1] <= n_gavel):
        raise ValueError(f"shared {shared} must lie within the workloads ({n_pollux}, {n_gavel})")
    pollux = rep**2 + (k80**2 + t4**2) + (p100**2 + t4**2) + t4**2  # T4, K80, P100, V100
    gavel = 3 * rep**2 + t4**2
    measured = 4 * rep**2
    total = (n_pollux - shared[0]) * pollux + (n_gavel - shared[1]) * gavel + sum(shared) * measured
    return float(np.sqrt(total / (4 * (n_pollux + n_gavel))))


def shared_model_counts(workloads: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """How many of the calibrated ``workloads`` are Pollux and Gavel workloads of a model both
    studies measured (``gpu_speed.SHARED_MODELS``)."""
    apps, jobs = (set(side) for side in zip(*gpu_speed.SHARED_MODELS, strict=True))
    specs = [WORKLOADS_BY_NAME[w["name"]] for w in workloads]
    return (
        sum(s.source == "pollux" and s.key in apps for s in specs),
        sum(s.source == "gavel" and s.key in jobs for s in specs),
    )


def job_spread(data_dir: Path = DEFAULT_DATA_DIR, calibrated: Path = DEFAULT_OUTPUT) -> JobSpread:
    """All the evidence and the two chosen spreads, from ``data_dir`` and the fits in ``calibrated``."""
    shipped = json.loads(Path(calibrated).read_text())
    ratios = gavel_log_ratios(data_dir)
    batches = {WORKLOADS_BY_NAME[w["name"]].key: w["local_batch"] for w in shipped["workloads"]}
    t4 = gpu_speed.t4_over_v100(batches, data_dir)
    t4_rms = float(np.sqrt(np.mean(np.log(np.array(list(t4.per_model.values())) / t4.ratio) ** 2)))
    rep_comp, rep_step, groups = repeat_spreads(data_dir)
    k80, p100 = (robust_sd(ratios[g]) for g in ("k80", "p100"))
    sources = [WORKLOADS_BY_NAME[w["name"]].source for w in shipped["workloads"]]
    shared = shared_model_counts(shipped["workloads"])
    cells = compute_cell_rms(
        sources.count("pollux"), sources.count("gavel"), k80, p100, t4_rms, rep_comp, shared
    )
    dev = sync_deviations(shipped, data_dir)
    transfer = dev.pop("transfer")
    per_fit = tuple((name, robust_sd(x), len(x)) for name, x in dev.items())
    sync = float(np.median([v for _, v, _ in per_fit]))
    return JobSpread(
        sigma_compute=round(cells, 2),
        sigma_sync=round(sync, 2),
        compute_rms=cells,
        sync_median=sync,
        num_gavel_job_types=len(ratios["k80"]),
        k80_ratio=(k80, float(np.std(ratios["k80"], ddof=1))),
        p100_ratio=(p100, float(np.std(ratios["p100"], ddof=1))),
        t4_ratios=tuple(t4.per_model.items()),
        t4_ratio_rms=t4_rms,
        num_repeat_groups=groups,
        repeat_compute=rep_comp,
        repeat_step=rep_step,
        sync_per_fit=per_fit,
        sync_pooled=robust_sd(np.concatenate(list(dev.values()))),
        sync_transfer=(robust_sd(transfer), len(transfer)),
    )


def format_markdown(sp: JobSpread) -> str:
    """Markdown table of the evidence and the chosen spreads (as in docs/calibration.md)."""
    nj, t4 = sp.num_gavel_job_types, ", ".join(f"{j} {r:.3f}" for j, r in sp.t4_ratios)
    rep, (tr, ntr) = f"{sp.repeat_compute:.3f} ({sp.repeat_step:.3f})", sp.sync_transfer
    compute = [
        (f"Gavel 1-GPU K80/V100, {nj} job types (plain std)", "{:.3f} ({:.3f})".format(*sp.k80_ratio)),
        (f"Gavel 1-GPU P100/V100, {nj} job types (plain std)", "{:.3f} ({:.3f})".format(*sp.p100_ratio)),
        (f"T4/V100 of the shared models ({t4}): RMS from geometric mean", f"{sp.t4_ratio_rms:.3f}"),
        (f"Pollux repeats, {sp.num_repeat_groups} groups: step - sync time (step time)", rep),
        ("**sigma_compute**: RMS over the cells", f"{sp.compute_rms:.3f} -> **{sp.sigma_compute:.2f}**"),
    ]
    sync = [(f"fit {name}, {n} points", f"{v:.3f}") for name, v, n in sp.sync_per_fit] + [
        ("all fits' points pooled", f"{sp.sync_pooled:.3f}"),
        (f"Gavel P100/K80 points under the V100 fits, {ntr} points", f"{tr:.3f}"),
        ("**sigma_sync**: median over the fits", f"{sp.sync_median:.3f} -> **{sp.sigma_sync:.2f}**"),
    ]
    rows = [("compute", *r) for r in compute] + [("sync", *r) for r in sync]
    return markdown_table(["term", "evidence", "log spread"], rows, align=("---", "---", "---:"))


def _read_calibrated(text: str) -> None:
    """Refuse (one line, exit 2) a ``--calibrated`` that is not a readable JSON object of workloads."""
    if not text:
        fail("--calibrated is empty: name a calibrated-workloads JSON (or leave the flag out)", PROG)
    try:
        shipped = json.loads(Path(text).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        fail(f"--calibrated {text!r} is not valid JSON: {err.msg} (line {err.lineno})", PROG)
    except UnicodeDecodeError:
        fail(f"--calibrated {text!r} is not UTF-8 text", PROG)
    except OSError as err:
        fail(f"cannot read --calibrated {text!r}: {err.strerror or err}", PROG)
    if not isinstance(shipped, dict) or "workloads" not in shipped:
        fail(f"--calibrated {text!r} is not a calibrated-workloads JSON (no 'workloads')", PROG)
    workloads = shipped["workloads"]
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, dict) for w in workloads):
        fail(f"--calibrated {text!r} has no workloads: 'workloads' must be a non-empty list of objects", PROG)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and print :func:`format_markdown` of :func:`job_spread`; bad input is
    one line on stderr and exit status 2."""
    parser = OneLineArgumentParser(prog=PROG, description=summary(__doc__))
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="folder with the vendored data (default: the copy inside the package)",
    )
    parser.add_argument(
        "--calibrated",
        default=str(DEFAULT_OUTPUT),
        help="calibrated-workloads JSON whose fits to use (default: the one the environment loads)",
    )
    args = parser.parse_args(argv)
    if not Path(args.data_dir).is_dir():
        fail(f"--data-dir {args.data_dir!r} is not a folder", PROG)
    _read_calibrated(args.calibrated)
    where = f"--data-dir {args.data_dir!r} and --calibrated {args.calibrated!r}"
    try:
        # A NaN or negative fit is refused below in one line, not warned about on the way.
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            spread = job_spread(Path(args.data_dir), Path(args.calibrated))
    except KeyError as err:
        fail(f"cannot size the spreads from {where}: missing {err.args[0] if err.args else err!r}", PROG)
    except (ValueError, TypeError, IndexError, csv.Error, OSError) as err:
        fail(f"cannot size the spreads from {where}: {first_line(err)}", PROG)
    if not all(np.isfinite(v) for v in (spread.compute_rms, spread.sync_median, spread.sync_pooled)):
        fail(
            f"cannot size the spreads from {where}: they come out non-finite (a fit or a measurement "
            "that is NaN, negative or zero where a time must be positive)",
            PROG,
        )
    print(format_markdown(spread))
    return 0


if __name__ == "__main__":
    run_command(main, PROG)
