"""The paper's headline figures, computed from per-job figures of methods run on the same jobs.

The paper reports a 67.2 % training-time reduction for deadline-critical jobs, a 68.8 % cost
reduction for budget-constrained jobs and a 73.4 % improvement in SLA compliance, against "static
baselines" it does not define, without saying how it averages or whether 73.4 % is relative or in
percentage points (reference notes §11). Here, against each static baseline ``B``:

* ``time_reduction`` = mean of ``1 - T_policy / T_B`` over the ``deadline-critical`` jobs;
* ``cost_reduction`` = mean of ``1 - C_policy / C_B`` over the ``budget-constrained`` jobs;
* ``sla_compliance_gain``: compliance is the fraction of the six job-level SLAs met, pooled over
  every evaluated scenario; the gain is given relative (``(c_policy - c_B) / c_B``) and in
  percentage points;

each both as a mean over jobs and as a mean over workloads of per-workload means (every workload
weighs the same, as "averaged over workloads" in the reference notes' protocol). Jobs pair up by
index (common random numbers); a pair counts only when both runs finished.
"""

from __future__ import annotations

import numpy as np

Figures = dict[str, np.ndarray]
Results = dict[str, dict[str, Figures]]  # scenario -> method -> per-job figures

TIME_SCENARIO = "deadline-critical"
COST_SCENARIO = "budget-constrained"


def job_and_workload_means(values: np.ndarray, workloads: np.ndarray) -> dict[str, float]:
    """Mean over jobs and mean over workloads of per-workload means (NaN when there are no jobs)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {"job_average": float("nan"), "workload_average": float("nan")}
    per_workload = [values[workloads == w].mean() for w in np.unique(workloads)]
    return {"job_average": float(values.mean()), "workload_average": float(np.mean(per_workload))}


def paired_reduction(ours: Figures, baseline: Figures, figure: str) -> dict[str, float]:
    """``1 - ours / baseline`` of ``figure`` per job, averaged (see the module docstring)."""
    both = ours["finished"].astype(bool) & baseline["finished"].astype(bool)
    ratio = np.asarray(ours[figure], np.float64)[both] / np.asarray(baseline[figure], np.float64)[both]
    return job_and_workload_means(1.0 - ratio, np.asarray(ours["workload"])[both])


def paired_ratio(ours: Figures, reference: Figures, figure: str) -> dict[str, float]:
    """``ours / reference`` of ``figure`` per job, averaged (e.g. the policy's time over the oracle's)."""
    reduction = paired_reduction(ours, reference, figure)
    return {name: 1.0 - value for name, value in reduction.items()}


def pooled(results: Results, method: str, figure: str) -> tuple[np.ndarray, np.ndarray]:
    """``figure`` and the workload of every finished job of ``method`` over all scenarios."""
    values, workloads = [], []
    for by_method in results.values():
        figures = by_method[method]
        done = figures["finished"].astype(bool)
        values.append(np.asarray(figures[figure], np.float64)[done])
        workloads.append(np.asarray(figures["workload"])[done])
    return np.concatenate(values), np.concatenate(workloads)


def compliance_gain(results: Results, ours: str, baseline: str) -> dict[str, dict[str, float]]:
    """SLA compliance of ``ours`` against ``baseline`` over every scenario: relative and in points."""
    mine = job_and_workload_means(*pooled(results, ours, "sla_compliance"))
    theirs = job_and_workload_means(*pooled(results, baseline, "sla_compliance"))
    return {
        average: {
            "ours": mine[average],
            "baseline": theirs[average],
            "relative": (mine[average] - theirs[average]) / theirs[average]
            if theirs[average] > 0
            else float("nan"),
            "points": 100.0 * (mine[average] - theirs[average]),
        }
        for average in ("job_average", "workload_average")
    }


def headline_figures(results: Results, ours: str, baselines: tuple[str, ...]) -> dict[str, dict]:
    """The three headline figures of ``ours`` against each baseline (where its scenario was run;
    ``ValueError`` for a method a headline scenario it ran did not run)."""
    _check_methods(results, ours, *baselines)
    out: dict[str, dict] = {}
    for baseline in baselines:
        row: dict[str, dict] = {}
        if TIME_SCENARIO in results:
            by_method = results[TIME_SCENARIO]
            row["time_reduction"] = paired_reduction(by_method[ours], by_method[baseline], "episode_time_s")
        if COST_SCENARIO in results:
            by_method = results[COST_SCENARIO]
            row["cost_reduction"] = paired_reduction(by_method[ours], by_method[baseline], "episode_cost_usd")
        row["sla_compliance_gain"] = compliance_gain(results, ours, baseline)
        out[baseline] = row
    return out


def oracle_gap(results: Results, ours: str, oracle: str) -> dict[str, dict[str, float]]:
    """``ours`` over the oracle: time on deadline-critical jobs, cost on budget-constrained ones."""
    return reference_gap(results, ours, oracle, "oracle")


def anchor_gap(results: Results, ours: str, anchor: str) -> dict[str, dict[str, float]]:
    """``ours`` over an anchor (e.g. the best walk-then-hold controller with the paper's moves), as
    :func:`oracle_gap`: ``time_over_anchor`` and ``cost_over_anchor``."""
    return reference_gap(results, ours, anchor, "anchor")


def reference_gap(results: Results, ours: str, reference: str, label: str) -> dict[str, dict[str, float]]:
    """``ours`` over ``reference``, job by job: time on deadline-critical jobs
    (``time_over_<label>``), cost on budget-constrained ones (``cost_over_<label>``); empty where
    ``results`` ran neither scenario. ``ValueError`` for a method a scenario it ran did not run."""
    _check_methods(results, ours, reference)
    out = {}
    if TIME_SCENARIO in results:
        out[f"time_over_{label}"] = paired_ratio(
            results[TIME_SCENARIO][ours], results[TIME_SCENARIO][reference], "episode_time_s"
        )
    if COST_SCENARIO in results:
        out[f"cost_over_{label}"] = paired_ratio(
            results[COST_SCENARIO][ours], results[COST_SCENARIO][reference], "episode_cost_usd"
        )
    return out


def _check_methods(results: Results, *methods: str) -> None:
    """``ValueError`` naming a method that a headline scenario of ``results`` did not run (a
    misspelt name raised a bare ``KeyError``)."""
    for scenario in (TIME_SCENARIO, COST_SCENARIO):
        ran = results.get(scenario, {})
        missing = [method for method in methods if scenario in results and method not in ran]
        if missing:
            held = ", ".join(ran) or "no method"
            raise ValueError(f"no {missing[0]!r} in the {scenario} results; they hold {held}")
