"""``benchmarks.epoch_times``: the relocation arithmetic matches the env's contention chain, and the
report's figures come from the env's epoch model."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.epoch_times import run, to_markdown
from slamorl_jax.env.relocation_payback import contended_epochs_avoided


def chain_contended_epochs_saved(start: float, end: float, epochs: int = 500) -> float:
    """The env's chain (``job_env.step``) propagated epoch by epoch: after a contended epoch, the
    expected contended epochs that follow on the old nodes minus those on fresh ones (uncontended
    at the move)."""
    stay, moved, difference = 1.0, 0.0, 0.0
    for _ in range(epochs):
        stay = stay * (1 - end) + (1 - stay) * start
        moved = moved * (1 - end) + (1 - moved) * start
        difference += stay - moved
    return difference


@pytest.mark.parametrize(("start", "end"), [(0.05, 0.25), (0.2, 0.1), (0.5, 0.5)])
@pytest.mark.parametrize("epochs_left", [1, 3, 40, 500])
def test_the_epochs_a_relocation_saves_match_the_chain(start: float, end: float, epochs_left: int) -> None:
    assert float(contended_epochs_avoided(1 - start - end, epochs_left)) == pytest.approx(
        chain_contended_epochs_saved(start, end, epochs_left), rel=1e-5, abs=1e-6
    )


def test_the_report_sets_the_contended_epochs_extra_time_against_the_pause() -> None:
    payload = run(argparse.Namespace(gpus=1, cpus_per_gpu=4.0))
    assert payload["contended_epochs_saved"] == pytest.approx(7 / 3)  # the defaults: rho = 0.7
    rows = payload["rows"]
    assert len({r["workload"] for r in rows}) == 13 and len(rows) == 13 * 4
    for r in rows:
        assert 0 < r["epoch_s"] < r["contended_epoch_s"]
        extra = r["contended_epoch_s"] - r["epoch_s"]
        assert r["relocation_saving_over_pause"] == pytest.approx(
            7 / 3 * extra / payload["reallocation_pause_s"]
        )
    ml20m = [r for r in rows if r["workload"] == "ml20m-autoencoder"]
    assert all(r["relocation_saving_over_pause"] < 1 for r in ml20m)  # docs/scenarios.md says so
    assert "| ml20m-autoencoder | T4 | 100-120 | no |" in to_markdown(payload)
