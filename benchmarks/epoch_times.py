"""How long each workload's epoch is in the model, and whether a relocation can pay for its pause.

    python -m benchmarks.epoch_times [--gpus 1] [--cpus-per-gpu 4]
        [--out benchmarks/results/epoch_times.json] [--overwrite]

Per workload and GPU type: the noise-free epoch time of the workload's profile on ``--gpus`` GPUs
with ``--cpus-per-gpu`` CPUs each (clipped to the cluster as a target is, ``action_sets.target_cpus``),
uncontended and contended (``env/job_model.epoch_metrics``). Contention is a two-state chain per
epoch (``contention_start_prob``, ``contention_end_prob``; ``suggested_slas.contention_share``), so
after a contended epoch a relocation lowers the chance that each later epoch is contended by
``rho^k`` with ``rho = 1 - start - end``: it saves ``rho / (1 - rho)`` contended epochs' extra time on
average (2.33 with the defaults; fewer if the job ends first; ``env/relocation_payback.py``, which
the policy's payback rule uses). The report sets that saving against
the GPU re-allocation pause a relocation pays: below 1, relocating away from contention loses time
on average, whatever the policy knows. A mid-run event's slow node (``shifts.py``) stays slow, so
there a relocation can pay on short epochs too. Model arithmetic, no episodes: seconds.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp

from benchmarks.common import machine_info, parse_and_report
from slamorl_jax.cli_args import OneLineArgumentParser, bounded, run_command, summary
from slamorl_jax.env import JobAllocationEnv
from slamorl_jax.env.action_sets import target_cpus
from slamorl_jax.env.job_model import epoch_metrics, job_constants_table
from slamorl_jax.env.relocation_payback import contended_epochs_avoided, relocation_payback
from slamorl_jax.env.suggested_slas import contention_share
from slamorl_jax.markdown import markdown_table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "epoch_times.json"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every workload on every GPU type; a JSON-ready payload."""
    env = JobAllocationEnv()
    params = env.default_params
    catalog = env.catalog
    gpus, cpus = target_cpus(jnp.asarray(args.gpus), jnp.asarray(float(args.cpus_per_gpu)), params)
    rho = float(contention_share(params)[1])
    saved_epochs = float(contended_epochs_avoided(rho))
    pause = float(params.reallocation_pause_s)
    table = job_constants_table(params)
    rows = []
    for index, name in enumerate(catalog.workload_names):
        job = jax.tree.map(lambda x, i=index: x[i], table)
        calm = epoch_metrics(job, gpus, cpus, params).epoch_time_s
        slowed = epoch_metrics(job, gpus, cpus, params, contended=True).epoch_time_s
        for type_index, gpu_type in enumerate(catalog.gpu_types):
            calm_s, slowed_s = float(calm[type_index]), float(slowed[type_index])
            rows.append(
                {
                    "workload": name,
                    "gpu_type": gpu_type,
                    "epochs": [int(catalog.epochs_min[index]), int(catalog.epochs_max[index])],
                    "data_parallel": bool(catalog.data_parallel[index]),
                    "epoch_s": calm_s,
                    "contended_epoch_s": slowed_s,
                    "relocation_saving_over_pause": float(
                        relocation_payback(math.log(slowed_s / calm_s), calm_s / pause, math.inf, rho)
                    ),
                }
            )
    return {
        "gpus": int(gpus),
        "cpus": int(cpus),
        "reallocation_pause_s": pause,
        "contention_autocorrelation": rho,
        "contended_epochs_saved": saved_epochs,
        "rows": rows,
        "machine": machine_info(),
    }


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per workload and GPU type."""
    lines = [
        [
            r["workload"],
            r["gpu_type"],
            f"{r['epochs'][0]}-{r['epochs'][1]}",
            "yes" if r["data_parallel"] else "no",
            f"{r['epoch_s']:,.1f}",
            f"{r['contended_epoch_s']:,.1f}",
            f"{r['relocation_saving_over_pause']:.2f}",
        ]
        for r in payload["rows"]
    ]
    headers = [
        "workload",
        "GPU type",
        "epochs",
        "data-parallel",
        "epoch (s)",
        "contended epoch (s)",
        "relocation's saving / pause",
    ]
    return (
        f"Noise-free epoch times of each workload's profile on {payload['gpus']} GPU(s) and "
        f"{payload['cpus']} CPUs. A relocation right after a contended epoch saves "
        f"{payload['contended_epochs_saved']:.2f} contended epochs' extra time on average (contention's "
        f"one-epoch autocorrelation {payload['contention_autocorrelation']:.2f}) and pays a "
        f"{payload['reallocation_pause_s']:.0f} s pause: below 1, it loses time on average.\n\n"
        + markdown_table(headers, lines)
        + f"\n\nMachine: {payload['machine']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, write the JSON and Markdown."""
    parser = OneLineArgumentParser(prog="python -m benchmarks.epoch_times", description=summary(__doc__))
    parser.add_argument("--gpus", type=bounded(int, 1, 64), default=1, help="GPUs of the allocation")
    parser.add_argument(
        "--cpus-per-gpu", type=bounded(float, 0.0, 64.0), default=4.0, help="CPUs per GPU (0: the fewest)"
    )
    parse_and_report(parser, argv, DEFAULT_OUT, run, to_markdown)


if __name__ == "__main__":
    run_command(main, "python -m benchmarks.epoch_times")
