"""The exploration-overhead benchmark's per-job figures (``benchmarks/exploration_overhead.py``).

Once the episode runner kept jobs cut at the step limit (``truncated``) apart from jobs that ran to
their end (``finished``), the benchmark's five-epoch window counted only the jobs of five epochs or
fewer: about a tenth of them, whose figures were whole-job ones (a cold overhead of -0.06 and cuts
above 100 % against the README's 0.143 and 52-72 %), and a run of a few jobs divided by a zero cold
overhead."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.exploration_overhead import cut, overhead_per_job


def _figures(time_s: list[float], finished: list[bool], truncated: list[bool]) -> dict[str, np.ndarray]:
    """Episode figures of three jobs of 10 epochs (time reference 100 s, cost reference $10)."""
    n = len(time_s)
    return {
        "finished": np.array(finished),
        "truncated": np.array(truncated),
        "epochs": np.full(n, 10),
        "time_ref_s": np.full(n, 100.0),
        "cost_ref_usd": np.full(n, 10.0),
        "preference": np.tile([0.6, 0.2, 0.2], (n, 1)),
        "episode_time_s": np.array(time_s),
        "episode_cost_usd": np.full(n, 5.0),
        "mean_severity": np.zeros(n),
    }


def test_jobs_cut_at_the_window_count_and_jobs_that_ran_on_do_not() -> None:
    oracle = _figures([40.0, 40.0, 40.0], [False, False, True], [True, True, False])
    started = _figures([50.0, 60.0, 70.0], [False, False, False], [True, False, True])
    overhead = overhead_per_job(started, oracle, epochs=5)["overhead"]
    # job 0: both runs cut at the window (5 of 10 epochs: time scale 50 s): regret 0.6 x 10 / 50 / 0.8
    assert overhead[0] == pytest.approx(0.6 * 10.0 / 50.0 / 0.8)
    assert np.isnan(overhead[1])  # the started run did not end its window
    assert overhead[2] == pytest.approx(0.6 * 30.0 / 50.0 / 0.8)  # cut in one run, finished in the other


def test_a_cut_needs_a_cold_overhead_to_cut() -> None:
    assert cut(0.05, 0.1) == pytest.approx(0.5)
    assert cut(-0.2, 0.1) == pytest.approx(3.0)
    for cold in (0.0, -0.015, math.nan, 0.0003):  # 0.0003: a cut of 2725 % of nothing
        assert math.isnan(cut(0.01, cold))
