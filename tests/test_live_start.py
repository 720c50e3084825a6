"""A new job's first allocation in ``recommend``: ``--history``, ``--probe_plan`` and reported probes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_harness import assert_refused, call

from slamorl_jax import recommend as recommend_cli
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.checkpoint import load_policy
from slamorl_jax.history import HistoryRecord, save_records
from slamorl_jax.live import LiveJob, live_state

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
NEW_JOB = {
    "workload": "imagenet-resnet50",
    "gpu_type": "T4",
    "gpus": 4,
    "cpus": 32,
    "epochs_done": 0,
    "epochs_total": 60,
    "elapsed_s": 0,
    "cost_usd": 0,
    "last_epoch_time_s": 1550,
    "throughput": 830,
    "gpu_util": 0.8,
    "cpu_util": 0.4,
    "memory_used_gib": 64,
    "memory_alloc_gib": 160,
    "price_per_hour": 3.23,
    "deadline_s": 90_000,
    "budget_usd": 80,
    "preference": "time",
}
STORE = (
    HistoryRecord("imagenet-resnet50", "T4", 60, 88_000.0, 85.0, (0.6, 0.2, 0.2), 8, 32),
    HistoryRecord("imagenet-resnet50", "T4", 60, 88_000.0, 85.0, (0.2, 0.6, 0.2), 2, 8),
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    save_records(STORE, tmp_path / "store.json")
    return tmp_path


def _recommend(job: dict, *flags: str) -> object:
    Path("job.json").write_text(json.dumps(job))
    return lambda: recommend_cli.main(["--job=job.json", f"--checkpoint={SHIPPED}", *flags])


def test_history_gives_a_new_job_its_nearest_records_allocation(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = call(_recommend(NEW_JOB, "--history=store.json"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert (answer["source"], answer["gpus"], answer["cpus"]) == ("history", 8, 32)
    assert answer["record"]["preference"][0] == pytest.approx(0.6)
    # A job that has run epochs gets the policy's answer as before.
    started = {**NEW_JOB, "epochs_done": 2, "elapsed_s": 3100, "cost_usd": 2.8}
    outcome = call(_recommend(started, "--history=store.json"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert "action" in json.loads(outcome.stdout)


def test_probe_plan_then_reported_probes_feed_the_model(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = call(_recommend(NEW_JOB, "--probe_plan"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    plan = json.loads(outcome.stdout)
    runs = [(run["gpus"], run["cpus"]) for run in plan["probes"]]
    assert runs[0] == (4, 32) and len(set(runs)) == len(runs) >= 2
    probes = [{"gpus": g, "cpus": c, "epoch_time_s": 1400.0 / g} for g, c in runs]
    job = LiveJob.from_dict({**NEW_JOB, "probes": probes})
    state = live_state(job, env_params_from_config(load_policy(SHIPPED).config))
    assert int(state.epoch) == 0 and np.asarray(state.model_stats)[0] > 0
    outcome = call(_recommend({**NEW_JOB, "probes": probes}), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert "action" in json.loads(outcome.stdout)


@pytest.mark.parametrize(
    ("job", "flags", "phrases"),
    [
        ({**NEW_JOB, "epochs_done": 1}, ("--probe_plan",), ("no epoch yet",)),
        (NEW_JOB, ("--history=missing.json",), ("missing.json",)),
        (NEW_JOB, ("--history=store.json", "--probe_plan"), ("ask for one",)),
        ({**NEW_JOB, "probes": [{"gpus": 1}]}, (), ("probes[0]",)),
        ({**NEW_JOB, "probes": [{"gpus": 99, "cpus": 8, "epoch_time_s": 9.0}]}, (), ("probes[0]",)),
    ],
)
def test_bad_first_allocation_requests_are_refused(
    job: dict,
    flags: tuple[str, ...],
    phrases: tuple[str, ...],
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert_refused(call(_recommend(job, *flags), capsys, workdir), *phrases)
