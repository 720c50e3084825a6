"""Assemble every fit into the calibrated-workloads JSON the environment loads.

:func:`calibrate` runs all fits and returns the JSON-ready dict plus a fit-quality report;
:func:`write_json` writes it atomically (temporary file in the target folder, then rename).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slamorl_jax.atomic_files import write_text_atomically
from slamorl_jax.calibration import (
    cpu_profiles,
    gavel_fit,
    gpu_speed,
    pollux_fit,
    prices,
    requested,
)
from slamorl_jax.calibration.loaders import DEFAULT_DATA_DIR, load_pollux_validation
from slamorl_jax.calibration.model import PARAM_NAMES
from slamorl_jax.calibration.workloads import (
    GAVEL_HARDWARE,
    POLLUX_HARDWARE,
    WORKLOADS,
    Hardware,
    WorkloadSpec,
    epoch_range,
)
from slamorl_jax.env.catalog import SUPPORTED_FORMAT_VERSION
from slamorl_jax.markdown import markdown_table

GENERATED_BY = "python -m slamorl_jax.calibration"
#: Decimal digits kept in the JSON (well below the fits' precision, keeps diffs readable).
SIGNIFICANT_DIGITS = 10


@dataclass
class Report:
    """Fit-quality numbers printed by the CLI (not all of them go into the JSON)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    cpu: dict[str, cpu_profiles.CpuProfile] = field(default_factory=dict)
    t4_v100: gpu_speed.T4V100Ratio | None = None
    gavel_median_ratios: dict[str, float] = field(default_factory=dict)
    prices: prices.Prices | None = None
    gavel_gamma: float = float("nan")
    trace_samples_per_epoch: dict[str, int] = field(default_factory=dict)

    def format_table(self) -> str:
        """Human-readable summary of the fits."""
        lines = [
            f"{'workload':26s} {'src':6s} {'batch':>6s} {'n':>5s} {'median':>7s} {'max':>7s}"
            f" {'plac.':>7s} {'scal.':>7s} {'P100':>7s} {'K80':>7s}",
        ]

        def pct(x: float | None) -> str:
            return "      -" if x is None else f"{100 * x:6.2f}%"

        for r in self.rows:
            lines.append(
                f"{r['name']:26s} {r['source']:6s} {r['local_batch']:6d} {r['num_points']:5d}"
                f" {pct(r['median'])} {pct(r['max'])} {pct(r.get('placements'))}"
                f" {pct(r.get('scalability'))} {pct(r.get('P100'))} {pct(r.get('K80'))}"
            )
        lines.append("")
        memory = f"mem {cpu_profiles.MEM_GB_PER_GPU:g} GB/GPU"
        lines.append(f"Synergy CPU profiles ({memory}): c_sat, p, max abs error")
        for name, prof in self.cpu.items():
            lines.append(
                f"  {name:12s} c_sat={prof.c_sat:6.3f} p={prof.p:7.3f} max|err|={prof.max_abs_error:.3f}"
            )
        if self.t4_v100 is not None:
            per = ", ".join(
                f"{j}@{self.t4_v100.batches[j]}: {v:.3f}" for j, v in self.t4_v100.per_model.items()
            )
            lines.append(f"T4/V100 compute ratio: {self.t4_v100.ratio:.4f} ({per})")
        if self.gavel_median_ratios:
            lines.append(
                "Gavel median 1-GPU ratios over job types: "
                f"K80/V100 {self.gavel_median_ratios['K80']:.4f}, "
                f"P100/V100 {self.gavel_median_ratios['P100']:.4f}"
            )
        lines.append(f"Gavel fits: gamma fixed to the Pollux median {self.gavel_gamma:.4f}")
        if self.trace_samples_per_epoch:
            implied = ", ".join(f"{k} {v}" for k, v in self.trace_samples_per_epoch.items())
            lines.append(f"Samples/epoch implied by the Pollux validation traces: {implied}")
        if self.prices is not None:
            p = self.prices
            gpu = ", ".join(f"{k} {v:.4f}" for k, v in p.gpu_hour.items())
            lines.append(f"Prices: ${p.vcpu_hour:.5f}/vCPU-h, ${p.gib_hour:.6f}/GiB-h; $/GPU-h: {gpu}")
        return "\n".join(lines)


def _round(x: Any) -> Any:
    """Round floats (recursively) to :data:`SIGNIFICANT_DIGITS` significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{SIGNIFICANT_DIGITS}g}") if np.isfinite(x) else x
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def _hardware_fields(hw: Hardware) -> dict[str, Any]:
    return {
        "calibration_gpu": hw.gpu,
        "calibration_intra_node_gbps": hw.intra_node_gbps,
        "calibration_inter_node_gbps": hw.inter_node_gbps,
        "calibration_cpus_per_gpu": hw.cpus_per_gpu,
    }


def _entry(
    spec: WorkloadSpec,
    local_batch: int,
    epochs: int,
    model_params: dict[str, float],
    speeds: dict[str, float],
    cpu: cpu_profiles.CpuProfile,
    gpu_probs: list[float],
    fit: dict[str, Any],
) -> dict[str, Any]:
    lo, hi = epoch_range(epochs)
    hw = POLLUX_HARDWARE if spec.source == "pollux" else GAVEL_HARDWARE
    return {
        "name": spec.name,
        "source": spec.source,
        "model": spec.model,
        "dataset": spec.dataset,
        "samples_per_epoch": int(spec.samples_per_epoch),
        "local_batch": int(local_batch),
        "epochs_min": int(lo),
        "epochs_max": int(hi),
        "data_parallel": bool(spec.data_parallel),
        **_hardware_fields(hw),
        **{k: float(model_params[k]) for k in PARAM_NAMES},
        "compute_speed": {g: float(speeds[g]) for g in gpu_speed.GPU_TYPES},
        "cpu_profile": spec.cpu_profile,
        "cpu_c_sat": float(cpu.c_sat),
        "cpu_p": float(cpu.p),
        "requested_gpu_probs": [float(x) for x in gpu_probs],
        "fit": fit,
    }


def calibrate(data_dir: Path = DEFAULT_DATA_DIR) -> tuple[dict[str, Any], Report]:
    """Run every fit on the data in ``data_dir``; return the JSON dict and a report."""
    data_dir = Path(data_dir)
    report = Report()
    cpu = cpu_profiles.fit_all(data_dir)
    report.cpu = cpu
    req = requested.fit_requests(data_dir)
    price = prices.fit_prices(data_dir)
    report.prices = price

    # Pollux apps first: their gammas fix the Gavel gamma.
    pollux = {s.key: pollux_fit.fit_app(s.key, data_dir) for s in WORKLOADS if s.source == "pollux"}
    gavel_gamma = float(np.median([f.model.gamma for f in pollux.values()]))
    report.gavel_gamma = gavel_gamma

    # Gavel batches: chosen from the data for data-parallel types, fixed otherwise.
    gavel_specs = [s for s in WORKLOADS if s.source == "gavel"]
    batches: dict[str, int | None] = {}
    for s in gavel_specs:
        batches[s.key] = gavel_fit.choose_batch(s.key, data_dir) if s.data_parallel else s.gavel_batch
    t4 = gpu_speed.t4_over_v100({j: b for j, b in batches.items() if b is not None}, data_dir=data_dir)
    report.t4_v100 = t4
    report.gavel_median_ratios = gpu_speed.median_gavel_ratios(data_dir)

    entries = []
    for spec in WORKLOADS:
        if spec.source == "pollux":
            f = pollux[spec.key]
            epochs = max(t.num_epochs for t in load_pollux_validation(spec.key, data_dir))
            report.trace_samples_per_epoch[spec.name] = pollux_fit.trace_samples_per_epoch(spec.key, data_dir)
            fit = {
                "median_rel_error": f.median_rel_error,
                "max_rel_error": f.max_rel_error,
                "num_points": f.num_points,
                "data": (
                    f"pollux-osdi21/traces/{spec.key}/placements.csv ({f.num_placements_rows} rows)"
                    f" + scalability.csv ({f.num_scalability_rows} rows), all per-GPU batches"
                ),
            }
            entries.append(
                _entry(
                    spec,
                    f.local_batch,
                    epochs,
                    {k: getattr(f.model, k) for k in PARAM_NAMES},
                    gpu_speed.pollux_workload_speeds(spec.key, f.local_batch, t4.ratio, data_dir),
                    cpu[spec.cpu_profile],
                    req.pollux_gpu_probs[spec.key],
                    fit,
                )
            )
            report.rows.append(
                {
                    "name": spec.name,
                    "source": "pollux",
                    "local_batch": f.local_batch,
                    "num_points": f.num_points,
                    "median": f.median_rel_error,
                    "max": f.max_rel_error,
                    "placements": f.median_rel_error_placements,
                    "scalability": f.median_rel_error_scalability,
                }
            )
            continue
        batch = batches[spec.key]
        local_batch = batch if batch is not None else int(spec.unbatched_local_batch or 1)
        name = gavel_fit.job_key(spec.key, batch)
        speeds = gpu_speed.gavel_workload_speeds(name, t4.per_model.get(spec.key, t4.ratio), data_dir)
        g = gavel_fit.fit_job(
            spec.key,
            batch,
            local_batch,
            spec.data_parallel,
            gavel_gamma,
            speeds,
            data_dir,
        )
        assert spec.reference_epochs is not None
        configs = "1/2/4/8 GPUs consolidated + 2/4/8 unconsolidated" if spec.data_parallel else "1 GPU"
        fit = {
            "median_rel_error": g.median_rel_error,
            "max_rel_error": g.max_rel_error,
            "num_points": g.num_points,
            "data": f"gavel-osdi20/simulation_throughputs.json, '{name}', V100 ({configs})",
        }
        gpu_probs = req.philly_gpu_probs if spec.data_parallel else requested.single_gpu_probabilities()
        entries.append(
            _entry(
                spec,
                local_batch,
                spec.reference_epochs,
                {k: getattr(g.model, k) for k in PARAM_NAMES},
                speeds,
                cpu[spec.cpu_profile],
                gpu_probs,
                fit,
            )
        )
        report.rows.append(
            {
                "name": spec.name,
                "source": "gavel",
                "local_batch": local_batch,
                "num_points": g.num_points,
                "median": g.median_rel_error,
                "max": g.max_rel_error,
                "P100": g.transfer_median_rel_error.get("P100"),
                "K80": g.transfer_median_rel_error.get("K80"),
            }
        )

    out = {
        "format_version": SUPPORTED_FORMAT_VERSION,
        "generated_by": GENERATED_BY,
        "gpu_types": list(gpu_speed.GPU_TYPES),
        "requested_gpu_bins": list(requested.GPU_BINS),
        "requested_cpus_per_gpu": {
            "values": req.cpus_per_gpu_values,
            "probs": req.cpus_per_gpu_probs,
        },
        "prices": {
            "vcpu_hour": price.vcpu_hour,
            "gib_hour": price.gib_hour,
            "gpu_hour": dict(price.gpu_hour),
            "reference_code": dict(prices.REFERENCE_CODE_PRICES),
            "notes": prices.price_notes(),
        },
        "cpu_profiles": {
            name: {"c_sat": p.c_sat, "p": p.p, "max_abs_error": p.max_abs_error} for name, p in cpu.items()
        },
        "workloads": entries,
    }
    return _round(out), report


def dumps(obj: dict[str, Any]) -> str:
    """Deterministic JSON text (fixed key order as built, 1-space indent, trailing newline)."""
    return json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n"


def write_json(obj: dict[str, Any], path: Path) -> None:
    """Write ``obj`` to ``path`` atomically: a temporary file in the same folder, then one rename.

    The folder must exist (a mistyped path makes no new folders). The JSON text is made before any
    file, so a value JSON cannot hold (``ValueError``) creates nothing; a failed write (``OSError``)
    or a Ctrl-C under :func:`slamorl_jax.cli_args.run_command` removes the temporary file and leaves
    an existing ``path`` as it was.
    """
    write_text_atomically(path, dumps(obj))


# The docs' calibration tables' columns (docs/calibration.md).
ERROR_HEADERS = (
    "workload", "source", "batch", "points", "median err", "max err", "placements", "scalability",
    "P100 transfer", "K80 transfer",
)  # fmt: skip
FIT_HEADERS = (
    "workload", "alpha_c (s)", "beta_c (s/sample)", "alpha_local (s)", "beta_local (s)", "alpha_node (s)",
    "beta_node (s)", "gamma", "two-node factor", "T4", "K80", "P100", "V100",
)  # fmt: skip
WORKLOAD_HEADERS = (
    "workload", "model", "dataset", "samples/epoch", "epochs", "CPU profile (c_sat, p)",
    "requested GPUs P(1,2,4,8,16,32)",
)  # fmt: skip


def markdown_tables(obj: dict[str, Any], report: Report) -> str:
    """Markdown tables of the fitted parameters and errors (pasted into docs/calibration.md)."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f} %"

    errors = markdown_table(
        ERROR_HEADERS,
        [
            [
                *(r[key] for key in ("name", "source", "local_batch", "num_points")),
                *(pct(r.get(key)) for key in ("median", "max", "placements", "scalability", "P100", "K80")),
            ]
            for r in report.rows
        ],
        align=("---", "---", *["---:"] * 8),
    )
    fits = markdown_table(
        FIT_HEADERS,
        [
            [
                w["name"],
                *(f"{w[k]:.4g}" for k in PARAM_NAMES),
                *(f"{w['compute_speed'][g]:.3f}" for g in gpu_speed.GPU_TYPES),
            ]
            for w in obj["workloads"]
        ],
        align=("---", *["---:"] * 12),
    )
    workloads = markdown_table(
        WORKLOAD_HEADERS,
        [
            [
                *(w[key] for key in ("name", "model", "dataset")),
                f"{w['samples_per_epoch']:,}",
                f"{w['epochs_min']}-{w['epochs_max']}",
                f"{w['cpu_profile']} ({w['cpu_c_sat']:.2f}, {w['cpu_p']:.2f})",
                ", ".join(f"{x:.3f}" for x in w["requested_gpu_probs"]),
            ]
            for w in obj["workloads"]
        ],
        align=("---", "---", "---", "---:", "---", "---", "---"),
    )
    profiles = markdown_table(
        ["Synergy model", "c_sat (CPUs/GPU)", "p", "max abs error"],
        [
            [name, f"{p['c_sat']:.3f}", f"{p['p']:.3f}", f"{p['max_abs_error']:.3f}"]
            for name, p in obj["cpu_profiles"].items()
        ],
        align=("---", "---:", "---:", "---:"),
    )
    return "\n\n".join((errors, fits, workloads, profiles))
