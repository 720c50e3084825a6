"""An evaluation payload as Markdown, CSV, JSON and (with matplotlib installed) PNG plots."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from slamorl_jax.atomic_files import publish_staged, stage_text, staging, temporary_beside
from slamorl_jax.evaluation.headline import COST_SCENARIO, TIME_SCENARIO
from slamorl_jax.evaluation.methods import FOCUS_METHODS, ORACLE, REACHABLE
from slamorl_jax.json_output import dumps_strict
from slamorl_jax.markdown import markdown_table

SUMMARY_COLUMNS = (
    ("time_vs_request", "time / request", "{:.3f}"),
    ("cost_vs_request", "cost / request", "{:.3f}"),
    ("deadline_met", "deadline met", "{:.1%}"),
    ("budget_met", "budget met", "{:.1%}"),
    ("all_slas_met", "all SLAs met", "{:.1%}"),
    ("sla_compliance", "SLA compliance", "{:.1%}"),
    ("reallocations", "re-allocations", "{:.1f}"),
    ("relocations", "of them relocations", "{:.1f}"),
    ("mean_gpu_util", "GPU util", "{:.1%}"),
    ("mean_cpu_util", "CPU util", "{:.1%}"),
)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return markdown_table(headers, rows).splitlines()


def _pct(x: float | None) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{100 * x:+.1f} %"


def _holding_note(cfg: dict) -> str:
    """What the report's first paragraph says of the policies' hold thresholds (``--hold_below``,
    ``agent.decision``): nothing when every policy takes its plain argmax."""
    thresholds = {"the policy": cfg.get("hold_below", 0.0)}
    thresholds.update({f"`policy[{name}]`": t for name, t in cfg.get("compare_hold_below", {}).items()})
    if not any(thresholds.values()):
        return ""
    if len(set(thresholds.values())) == 1:
        return (
            " Every policy holds its allocation where its top action probability is below "
            f"{cfg['hold_below']:g} (`--hold_below`)."
        )
    listed = ", ".join(f"{who} below {t:g}" for who, t in thresholds.items())
    return f" Policies hold their allocation where their top action probability is low: {listed}."


def _payback_note(cfg: dict) -> str:
    """What the report's first paragraph says of the policy's relocation payback rule
    (``networks.relocation_pays``): nothing for a policy without one."""
    payback = cfg.get("relocate_payback") or 0.0
    if payback <= 0:
        return ""
    return (
        " The policy relocates only where a relocation after contention is expected to save at least "
        f"{payback:g} pause(s) (its relocation payback rule)."
    )


def to_markdown(payload: dict) -> str:
    """The evaluation as Markdown: per-scenario tables, headline figures, the gaps to the oracle and
    to the reachable anchor, the front."""
    cfg = payload["config"]
    checkpoint = cfg.get("checkpoint", "(given in Python)")
    lines = [
        "# Evaluation",
        "",
        f"Checkpoint `{checkpoint}` (step {cfg['checkpoint_step']}); {cfg['episodes']} fresh jobs "
        f"per scenario and seed, {cfg['seeds']} seed(s) from {cfg['seed']}; every method runs the same "
        "jobs with the same noise. Time and cost are relative to each job's requested allocation "
        "(mean over jobs)." + _holding_note(cfg) + _payback_note(cfg),
        "",
        "Methods:",
        *(f"- `{name}`: {text}" for name, text in payload["methods"].items()),
    ]
    for scenario, rows in payload["summaries"].items():
        lines += ["", f"## {scenario}", ""]
        table_rows = [
            [name] + [fmt.format(r[key]) for key, _, fmt in SUMMARY_COLUMNS] for name, r in rows.items()
        ]
        lines += _table(["method"] + [title for _, title, _ in SUMMARY_COLUMNS], table_rows)
    lines += [
        "",
        "## Headline figures (the paper's three, against each static baseline)",
        "",
        f"Time reduction: mean of 1 - T_policy / T_baseline over `{TIME_SCENARIO}` jobs; cost reduction "
        f"likewise over `{COST_SCENARIO}` jobs; SLA compliance (fraction of the six SLAs met) over every "
        "scenario, relative and in points. Each as a mean over jobs / a mean over workloads. "
        "The paper reports 67.2 %, 68.8 % and 73.4 % against undefined static baselines.",
        "",
    ]
    rows = []
    for baseline, row in payload["headline"].items():
        cells = [f"`{baseline}`"]
        for key in ("time_reduction", "cost_reduction"):
            r = row.get(key)
            cells.append("-" if r is None else f"{_pct(r['job_average'])} / {_pct(r['workload_average'])}")
        gain = row["sla_compliance_gain"]
        jobs, workloads = gain["job_average"], gain["workload_average"]
        cells.append(f"{_pct(jobs['relative'])} / {_pct(workloads['relative'])}")
        cells.append(f"{jobs['points']:+.1f} / {workloads['points']:+.1f}")
        rows.append(cells)
    headers = ["against", "time reduction", "cost reduction", "SLA compliance (relative)"]
    lines += _table([*headers, "SLA compliance (points)"], rows)
    if payload.get("oracle_gap"):
        lines += ["", "## Against the best static allocation in hindsight (oracle)", ""]
        for gap_key, who, workloads in (
            ("oracle_gap", "policy", True),
            (
                "forecast_start_oracle_gap",
                "the policy placed first where the profile's forecast ranks first "
                "(`policy_from_forecast`, no pause to leave the request),",
                True,
            ),
            (
                "profile_oracle_gap",
                "what the hidden truth costs a static choice: the oracle's choice made from the "
                "profile alone (`best_static_profile`),",
                False,
            ),
        ):
            lines += _oracle_gap_lines(payload.get(gap_key, {}), who, workloads)
    lines += _reachable_lines(payload)
    lines += _replanning_lines(payload)
    lines += _seed_lines(payload)
    lines += _workload_lines(payload)
    front = payload.get("front")
    if front:
        lines += [
            "",
            f"## Preference front ({front['scenario']} jobs)",
            "",
            f"Hypervolume of (time, cost) up to the reference point {tuple(front['reference_point'])}, "
            "and expected utility -(a t + (1 - a) c) over the time shares a.",
            "",
        ]
        rows = [
            [f"`{name}`", f"{f['hypervolume']:.3f}", f"{f['expected_utility']:.3f}"]
            for name, f in front["figures"].items()
        ]
        lines += _table(["method", "hypervolume", "expected utility"], rows)
        lines += ["", "Time share a: policy (time, cost) / oracle (time, cost)", ""]
        policy, oracle = front["curves"]["policy"], front["curves"][ORACLE]
        for i, share in enumerate(front["time_share"]):
            lines.append(
                f"- a = {share:.2f}: ({policy['time'][i]:.3f}, {policy['cost'][i]:.3f}) / "
                f"({oracle['time'][i]:.3f}, {oracle['cost'][i]:.3f})"
            )
    lines += ["", f"Wall time {payload['wall_s']:.0f} s; {payload['machine']}."]
    return "\n".join(lines) + "\n"


def _replanning_lines(payload: dict) -> list[str]:
    """The policy against the best static allocation and the re-planning oracle, on scenarios with
    mid-run events (``shifting``, ``mixed``)."""
    figures = payload.get("replanning", {})
    if not figures:
        return []
    lines = [
        "",
        "## Jobs whose world changes (against the re-planning oracle)",
        "",
        "`replanning_oracle` knows each job's mid-run event in advance and may move once, right after "
        "it; the best static allocation in hindsight also knows the event but holds one allocation. "
        "Objective: the scenario's (time and cost relative to the request, averaged), lower is better.",
        "",
    ]
    rows = [
        [
            scenario,
            f"{r['policy_objective']:.3f}",
            f"{r['best_static_oracle_objective']:.3f}",
            f"{r['replanning_oracle_objective']:.3f}",
            f"{r['policy_over_static_oracle']:.3f}",
            f"{r['policy_over_replanning']:.3f}",
            f"{r['policy_all_slas_met']:.1%} / {r['best_static_oracle_all_slas_met']:.1%} / "
            f"{r['replanning_oracle_all_slas_met']:.1%}",
        ]
        for scenario, r in figures.items()
    ]
    headers = ["scenario", "policy", "best static", "re-planning", "policy / static", "policy / re-planning"]
    return lines + _table([*headers, "all SLAs met (policy / static / re-planning)"], rows)


def _oracle_gap_lines(gap: dict, who: str, workloads: bool) -> list[str]:
    """One line per figure of an oracle gap (``headline.oracle_gap``): ``who``'s time or cost over
    the oracle's, mean over jobs (and over workloads)."""
    lines = []
    for key, text in (("time_over_oracle", "time"), ("cost_over_oracle", "cost")):
        if key in gap:
            line = f"- {who} {text} / oracle {text}: {gap[key]['job_average']:.3f} (jobs)"
            if workloads:
                line += f" / {gap[key]['workload_average']:.3f} (workloads)"
            lines.append(line)
    return lines


def _reachable_lines(payload: dict) -> list[str]:
    """The policy against the best walk-then-hold controller with the paper's moves (if it ran)."""
    gap = payload.get("reachable_gap", {})
    summaries = payload["summaries"]
    scenarios = [s for s, rows in summaries.items() if REACHABLE in rows and "policy" in rows]
    if not gap and not scenarios:
        return []
    lines = [
        "",
        "## Against the best controller reachable with the paper's 9 moves (reachable anchor)",
        "",
        f"`{REACHABLE}`: per job, the best walk-then-hold controller from the request (one paper move "
        "per epoch toward a destination, then keep it; pauses paid), chosen like the oracle on the "
        "noise-free model. A policy restricted to the 9 moves can reach it; the static oracle is "
        "placed at its allocation for free.",
        "",
    ]
    for key, text in (("time_over_anchor", "time"), ("cost_over_anchor", "cost")):
        if key in gap:
            lines.append(
                f"- policy {text} / anchor {text}: {gap[key]['job_average']:.3f} (jobs) / "
                f"{gap[key]['workload_average']:.3f} (workloads)"
            )
    for scenario in scenarios:
        rows = summaries[scenario]
        oracle = f", oracle {rows[ORACLE]['all_slas_met']:.1%}" if ORACLE in rows else ""
        lines.append(
            f"- {scenario}, all six SLAs met: policy {rows['policy']['all_slas_met']:.1%}, "
            f"anchor {rows[REACHABLE]['all_slas_met']:.1%}{oracle}"
        )
    return lines


def _seed_lines(payload: dict) -> list[str]:
    """Spread of each scenario's objective between seeds, for each ``FOCUS_METHODS`` method that ran."""
    per_seed = payload.get("per_seed_objective", {})
    if not per_seed or len(next(iter(next(iter(per_seed.values())).values()))) < 2:
        return []
    lines = ["", "## Spread between seeds (scenario objective, relative to the request)", ""]
    for scenario, by_method in per_seed.items():
        cells = ", ".join(
            f"{name} {min(v):.3f}-{max(v):.3f}" for name, v in by_method.items() if name in FOCUS_METHODS
        )
        lines.append(f"- {scenario}: {cells}")
    return lines


def _workload_lines(payload: dict) -> list[str]:
    """Per scenario, the objective per workload of each ``FOCUS_METHODS`` method that ran."""
    per_workload = payload.get("per_workload_objective", {})
    lines = []
    for scenario, rows in per_workload.items():
        methods = [m for m in FOCUS_METHODS if any(m in r for r in rows.values())]
        lines += ["", f"## {scenario} by workload (objective relative to the request)", ""]
        table_rows = [
            [
                name,
                f"{int(r.get('jobs', 0))}",
                *(f"{r[m]:.3f}" if m in r else "-" for m in methods),
            ]
            for name, r in rows.items()
        ]
        lines += _table(["workload", "jobs", *methods], table_rows)
    return lines


def to_csv(payload: dict) -> str:
    """One row per (scenario, method) with every summary figure."""
    out = io.StringIO()
    keys = [key for key, _, _ in SUMMARY_COLUMNS]
    writer = csv.writer(out)
    writer.writerow(["scenario", "method", "episodes", *keys])
    for scenario, rows in payload["summaries"].items():
        for name, r in rows.items():
            writer.writerow([scenario, name, int(r["episodes"]), *(f"{r[k]:.6g}" for k in keys)])
    return out.getvalue()


def write_outputs(out_dir: Path, payload: dict, plots: bool) -> list[Path]:
    """Write ``evaluation.{json,md,csv}`` (and PNG plots when asked) into ``out_dir``; the paths.

    Every file is written to a temporary file beside it first, and all replace their targets only
    once all are written: a failure (a full disk, a file-size limit) leaves an earlier evaluation's
    files as they were, never cut short or mixed with this one's."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # A Ctrl-C or SIGTERM while staging removes what was staged; one during the renames waits for
    # them, so the folder never holds some of this evaluation's files and some of an earlier one's.
    with staging() as staged:
        for name, text in (
            ("evaluation.json", dumps_strict(payload, indent=2, sort_keys=True) + "\n"),
            ("evaluation.md", to_markdown(payload)),
            ("evaluation.csv", to_csv(payload)),
        ):
            staged.append((stage_text(out_dir / name, text), out_dir / name))
        if plots:
            stage_plots(out_dir, payload, staged)
        publish_staged(staged)
    return [path for _, path in staged]


#: Markers that, with ten colours each, tell up to 60 methods apart on one plot.
MARKERS = ("o", "s", "^", "D", "v", "P")


def method_style(index: int) -> dict[str, str]:
    """A colour and marker that none other of the first 60 methods shares."""
    return {"color": f"C{index % 10}", "marker": MARKERS[(index // 10) % len(MARKERS)]}


def stage_plots(out_dir: Path, payload: dict, staged: list[tuple[Path, Path]]) -> None:
    """``scenarios.png`` (time and cost per method and scenario) and ``front.png`` (the front),
    each written to a temporary file beside it, its ``(temporary, target)`` pair put in ``staged``
    as soon as the file exists (``atomic_files.staging`` removes it if the writing fails)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def stage(fig: Any, name: str) -> None:
        tmp = temporary_beside(out_dir / name)
        staged.append((tmp, out_dir / name))
        fig.savefig(tmp, dpi=120, format="png", bbox_inches="tight")
        os.chmod(tmp, 0o644)  # as the text files: a temporary file is the owner's alone
        plt.close(fig)

    summaries = payload["summaries"]
    scenarios = list(summaries)
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios, strict=True):
        for index, (name, r) in enumerate(summaries[scenario].items()):
            ax.scatter(r["time_vs_request"], r["cost_vs_request"], label=name, **method_style(index))
        ax.set_title(scenario)
        ax.set_xlabel("time / request")
        ax.set_ylabel("cost / request")
        ax.set_xscale("log")
        ax.set_yscale("log")
    # Outside the axes: inside, the legend of 13-15 methods hid some of their points.
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    stage(fig, "scenarios.png")

    front = payload.get("front")
    if front:
        fig, ax = plt.subplots(figsize=(5, 4))
        curves, points = front["curves"], front["static_points"]
        for index, (name, curve) in enumerate(curves.items()):
            ax.plot(curve["time"], curve["cost"], marker="o", color=f"C{index}", label=name)
        for index, (name, point) in enumerate(points.items(), start=len(curves)):
            ax.scatter(point["time"], point["cost"], marker="s", color=f"C{index}", label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time / request")
        ax.set_ylabel("cost / request")
        ax.set_title(f"preference front ({front['scenario']})")
        ax.legend(fontsize="small")
        fig.tight_layout()
        stage(fig, "front.png")
