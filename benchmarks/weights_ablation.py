"""The adaptive-weights ablation: static vs severity vs dual weights, each over its training seeds.

    python -m benchmarks.weights_ablation \\
        --runs static=benchmarks/results/training_seeds_weights_static.json \\
        --runs severity=benchmarks/results/training_seeds.json \\
        --runs dual=benchmarks/results/training_seeds_weights_dual.json \\
        [--out benchmarks/results/weights_ablation.json]

Each input is a ``benchmarks.training_seeds`` report: the same training command and budget with one
``--weights`` form, one run per seed, every run evaluated on the same fresh jobs. Per scenario it
tabulates all six SLAs met and the scenario's objective over the best static oracle as mean ± sample
standard deviation [min, max] over seeds, and the difference of each adaptive form from static in
points of all SLAs met with whether the seed ranges overlap (issue 8 asks for >= 5 points and no
overlap on ``conflict``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

from benchmarks.common import check_out_path, machine_info, markdown_table, report
from slamorl_jax.cli_args import OneLineArgumentParser, fail

BASELINE = "static"


def read_runs(specs: list[str], prog: str) -> dict[str, dict[str, Any]]:
    """``name=path`` pairs to the reports they name (exit 2 on a bad pair or file)."""
    runs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            fail(f"--runs takes name=path, got {spec!r}", prog)
        try:
            runs[name] = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            fail(f"--runs {name}: cannot read {path}: {error}", prog)
    if BASELINE not in runs:
        fail(f"--runs needs a {BASELINE!r} entry to compare with", prog)
    return runs


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Per form and scenario: the seed statistics of all SLAs met and of the objective / oracle."""
    rows: dict[str, dict[str, Any]] = {}
    for name, payload in args.runs.items():
        figures = payload["figures"]
        scenarios = sorted({key.split("/")[0] for key in figures if key.endswith("/all_slas_met")})
        rows[name] = {
            "seeds": payload["seeds"],
            "train_flags": payload["train_flags"],
            "scenarios": {
                s: {
                    "all_slas_met": figures[f"{s}/all_slas_met"],
                    "over_oracle": figures[f"{s}/over_oracle"],
                    "all_slas_met_oracle": figures[f"{s}/all_slas_met_oracle"]["mean"],
                }
                for s in scenarios
            },
        }
    return {"rows": rows, "machine": machine_info()}


def _stats(s: dict[str, float], scale: float = 1.0, digits: int = 1) -> str:
    return (
        f"{scale * s['mean']:.{digits}f} ± {scale * s['std']:.{digits}f} "
        f"[{scale * s['min']:.{digits}f}, {scale * s['max']:.{digits}f}]"
    )


def to_markdown(payload: dict[str, Any]) -> str:
    """One row per scenario and form; the gain over static in points, with range overlap."""
    rows = payload["rows"]
    static = rows[BASELINE]["scenarios"]
    table = []
    for scenario in static:
        for name, row in rows.items():
            mine = row["scenarios"].get(scenario)
            if mine is None:
                continue
            met = mine["all_slas_met"]
            gain = "-"
            if name != BASELINE:
                base = static[scenario]["all_slas_met"]
                overlap = met["min"] <= base["max"] and base["min"] <= met["max"]
                gain = f"{100 * (met['mean'] - base['mean']):+.1f} ({'overlap' if overlap else 'no overlap'})"
            table.append(
                [
                    scenario,
                    name,
                    _stats(met, 100.0),
                    f"{100 * mine['all_slas_met_oracle']:.1f}",
                    _stats(mine["over_oracle"], digits=3),
                    gain,
                ]
            )
    headers = ["scenario", "weights", "all SLAs met % (seeds)", "oracle %", "objective / oracle", "vs static"]
    seeds = {name: row["seeds"] for name, row in rows.items()}
    return f"Training seeds per form: {seeds}; mean ± std [min, max] over seeds.\n\n" + markdown_table(
        headers, table
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the options, tabulate, print and write the report."""
    prog = "python -m benchmarks.weights_ablation"
    parser = OneLineArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="append", required=True, help="name=training_seeds JSON (repeat)")
    parser.add_argument("--out", default="benchmarks/results/weights_ablation.json")
    args = parser.parse_args(argv)
    args.out = Path(args.out)
    check_out_path(args.out, prog)
    args.runs = read_runs(args.runs, prog)
    report(args, run, to_markdown)


if __name__ == "__main__":
    main()
