"""What ``recommend`` refuses and what it flags (issue 11, rows 9-11).

Allocations outside the policy's cluster and finished jobs are refused instead of clipped; readings
outside the ranges the policy was trained on are listed in ``outside_training`` (and the JSON's
``in_training_range``) while the recommendation is still given.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.env.catalog import gpu_type_index, workload_index
from slamorl_jax.env.job_model import billed_usd, epoch_metrics, job_constants_table
from slamorl_jax.env.params import with_values
from slamorl_jax.env.shifts import NUM_SHIFT_KINDS
from slamorl_jax.live import check_recommendable
from slamorl_jax.live_checks import outside_training
from slamorl_jax.live_job import ZERO_SPEND_CHECKED_FROM_USD, LiveJob

PARAMS = env_params_from_config(TrainConfig())


def typical_job(**changes: object) -> LiveJob:
    """A job whose every reading is what the workload's profile forecasts (deadline and budget at
    the forecast for the whole job, epochs in the workload's range)."""
    workload, gpu_type, gpus, cpus, epochs, done = "imagenet-resnet50", "T4", 4, 32, 60, 10
    profile = jax.tree.map(
        lambda x: x[workload_index(workload), gpu_type_index(gpu_type)], job_constants_table(PARAMS)
    )
    m = epoch_metrics(profile, jnp.int32(gpus), jnp.int32(cpus), PARAMS)
    epoch_s, price = float(m.epoch_time_s), float(m.price_per_hour)
    job = LiveJob(
        workload=workload,
        gpu_type=gpu_type,
        gpus=gpus,
        cpus=cpus,
        epochs_done=done,
        epochs_total=epochs,
        elapsed_s=done * epoch_s,
        cost_usd=done * epoch_s * price / 3600,
        last_epoch_time_s=epoch_s,
        throughput=float(m.throughput),
        gpu_util=0.8,
        cpu_util=0.5,
        memory_used_gib=float(m.memory_used_gib),
        memory_alloc_gib=float(m.memory_alloc_gib),
        price_per_hour=price,
        deadline_s=epochs * epoch_s,
        budget_usd=epochs * epoch_s * price / 3600,
        history=tuple((gpus, cpus, epoch_s) for _ in range(done)),
    )
    return dataclasses.replace(job, **changes)


def test_a_typical_job_is_within_the_training_range() -> None:
    job = typical_job()
    check_recommendable(job, PARAMS)
    assert outside_training(job, PARAMS) == ()


@pytest.mark.parametrize(
    ("changes", "phrases"),
    [
        ({"gpus": 1000, "history": None}, ["1000 GPUs", "outside the policy's cluster", "at most 16"]),
        ({"cpus": 100_000, "history": None}, ["100000 CPUs", "outside the policy's cluster"]),
        ({"cpus": 30, "history": None}, ["30 CPUs", "CPU step"]),
        ({"requested_gpus": 64}, ["requested allocation", "64 GPUs"]),
        # Only the CPUs requested: the GPUs named were the current allocation's, without a word.
        ({"requested_cpus": 128}, ["requested allocation (requested_gpus left out: the current", "4 GPUs"]),
        ({"epochs_done": 60}, ["finished", "nothing to recommend"]),
    ],
    ids=["gpus", "cpus", "cpu step", "request", "half a request", "finished"],
)
def test_allocations_outside_the_cluster_and_finished_jobs_are_refused(
    changes: dict, phrases: list[str]
) -> None:
    """Row 11: refused with the allocation and the limit named, never clipped."""
    job = typical_job(**changes)
    with pytest.raises(ValueError) as error:
        check_recommendable(job, PARAMS)
    for phrase in phrases:
        assert phrase in str(error.value)


def test_history_outside_the_cluster_is_refused() -> None:
    last = typical_job().last_epoch_time_s
    job = typical_job(history=((4, 32, 100.0), (40, 32, 100.0), (4, 32, last)))
    with pytest.raises(ValueError, match=r"history\[1\]: 40 GPUs"):
        check_recommendable(job, PARAMS)


def longer(job: LiveJob, epochs: int) -> LiveJob:
    """``job`` with ``epochs`` epochs, its deadline and budget scaled with them."""
    scale = epochs / job.epochs_total
    return dataclasses.replace(
        job, epochs_total=epochs, deadline_s=job.deadline_s * scale, budget_usd=job.budget_usd * scale
    )


@pytest.mark.parametrize(
    ("job", "phrase"),
    [
        (longer(typical_job(), 1000), "epochs_total 1000 is outside"),
        (typical_job(deadline_s=10.0), "deadline_s is"),
        (typical_job(budget_usd=1e9), "budget_usd is"),
        (typical_job(last_epoch_time_s=1e6, history=None, elapsed_s=1e6 + 9 * 1550.0), "took"),
        # A price rise multiplies the GPU price by 1.5-3 (shifts.py): a discount or 10x is unseen.
        (typical_job(price_per_hour=0.5 * typical_job().price_per_hour), "price_per_hour is 0.5x"),
        (typical_job(price_per_hour=10 * typical_job().price_per_hour), "training jobs paid 1x-3x"),
    ],
    ids=["epochs", "deadline", "budget", "epoch time", "price discount", "price 10x"],
)
def test_readings_outside_training_are_flagged(job: LiveJob, phrase: str) -> None:
    """Row 11: each reading outside the training ranges gets its own sentence."""
    notes = outside_training(job, PARAMS)
    assert len(notes) == 1 and phrase in notes[0], notes


@pytest.mark.parametrize(
    ("field", "value"),
    [("gpus", 1e30), ("gpus", 10**30), ("epochs_total", 1e12), ("elapsed_s", 10**400), ("cost_usd", 1e300)],
)
def test_huge_numbers_are_refused_by_name(field: str, value: object) -> None:
    """Row 9: a ``ValueError`` naming the field, not an ``OverflowError``."""
    data = {k: v for k, v in dataclasses.asdict(typical_job()).items() if v is not None}
    data["history"] = [dict(zip(("gpus", "cpus", "epoch_time_s"), e, strict=True)) for e in data["history"]]
    with pytest.raises(ValueError, match=field):
        LiveJob.from_dict({**data, field: value})


def test_used_memory_above_the_allocation_is_refused() -> None:
    with pytest.raises(ValueError, match="memory_used_gib"):
        typical_job(memory_used_gib=500.0)


def test_a_price_a_rise_could_make_is_within_training() -> None:
    """2.5x the catalogue's price is a price rise the default scenario makes; without events it is not."""
    job = typical_job(price_per_hour=2.5 * typical_job().price_per_hour)
    assert outside_training(job, PARAMS) == ()
    no_events = with_values(PARAMS, shift_probs=np.eye(NUM_SHIFT_KINDS, dtype=np.float32)[0])
    assert "training jobs paid 1x-1x" in outside_training(job, no_events)[0]


def test_a_deadline_a_cut_could_make_is_within_training() -> None:
    """Training jobs' deadlines go below their drawn factor when the scenario cuts them (shifts.py):
    a deadline of 0.25x the request's forecast is within the default scenario's (0.3x, cut to 0.6 of
    it at most), and outside a scenario without events (the fuzz pass found it flagged)."""
    job = typical_job()
    tight = dataclasses.replace(job, deadline_s=0.25 * job.deadline_s)
    assert outside_training(tight, PARAMS) == ()
    no_events = with_values(PARAMS, shift_probs=np.eye(NUM_SHIFT_KINDS, dtype=np.float32)[0])
    notes = outside_training(tight, no_events)
    assert len(notes) == 1 and "deadline_s is 0.25x" in notes[0] and "0.3x-3x" in notes[0], notes
    assert (
        "0.18x-3x" in outside_training(dataclasses.replace(job, deadline_s=0.1 * job.deadline_s), PARAMS)[0]
    )


def test_an_elapsed_time_shorter_than_the_reported_epochs_is_refused() -> None:
    """1 s elapsed after ten epochs of 1,550 s was answered as a job far ahead of its deadline (its
    time SLA met, its severity 0); the epochs plus pauses fit, as the env's own jobs do."""
    job = typical_job()
    epoch = {"gpus": job.gpus, "cpus": job.cpus, "epoch_time_s": job.last_epoch_time_s}
    history = [epoch] * job.epochs_done
    with pytest.raises(ValueError, match=r"elapsed_s \(1 s\) is less than the 10 epochs of its history"):
        LiveJob.from_dict({**dataclasses.asdict(job), "history": history, "elapsed_s": 1.0})
    with pytest.raises(ValueError, match=r"elapsed_s \(1 s\) is less than its last epoch"):
        LiveJob.from_dict({**dataclasses.asdict(job), "history": None, "elapsed_s": 1.0})
    whole = job.epochs_done * job.last_epoch_time_s
    LiveJob.from_dict({**dataclasses.asdict(job), "history": history, "elapsed_s": whole})


def test_a_running_job_must_report_its_time_and_spend_so_far() -> None:
    """Left out (or null), ``elapsed_s`` and ``cost_usd`` read as 0: a running job taken for one
    that cost nothing and took no time; a new job may still leave them out."""
    job = {k: v for k, v in dataclasses.asdict(typical_job()).items() if k not in ("elapsed_s", "cost_usd")}
    job["history"] = None
    with pytest.raises(ValueError, match=r"missing job field\(s\): elapsed_s, cost_usd \(a job that has run"):
        LiveJob.from_dict(job)
    with pytest.raises(ValueError, match=r"missing job field\(s\): cost_usd "):
        LiveJob.from_dict({**job, "elapsed_s": 20_000.0, "cost_usd": None})
    with pytest.raises(ValueError, match=r"missing job field\(s\): cost_usd "):  # 10.0 epochs are 10
        LiveJob.from_dict({**job, "elapsed_s": 20_000.0, "epochs_done": float(job["epochs_done"])})
    assert LiveJob.from_dict({**job, "epochs_done": 0}).elapsed_s == 0.0
    # The constructor (the README's Python way) too: it took the spend left out for $0.
    with pytest.raises(ValueError, match=r"missing job field\(s\): cost_usd "):
        LiveJob(**{**job, "elapsed_s": 20_000.0})
    assert LiveJob(**{**job, "epochs_done": 0}).cost_usd == 0.0


def test_a_job_that_has_run_at_a_price_has_spent_something() -> None:
    """A new job's filled 0 spend kept by ``dataclasses.replace(new_job, epochs_done=5, ...)`` read
    as a job with its whole budget left; at a price of 0 (hardware already paid for) 0 stays."""
    job = typical_job()
    new_job = LiveJob(**{**dataclasses.asdict(job), "epochs_done": 0, "cost_usd": None, "history": None})
    assert new_job.cost_usd == 0.0
    with pytest.raises(
        ValueError, match=r"cost_usd is 0 but the job has run 10 epoch\(s\) over [0-9.]+ s at \$"
    ):
        dataclasses.replace(new_job, epochs_done=job.epochs_done)
    with pytest.raises(ValueError, match="cost_usd is 0"):
        LiveJob.from_dict({**dataclasses.asdict(job), "history": None, "cost_usd": 0})
    assert dataclasses.replace(new_job, epochs_done=job.epochs_done, price_per_hour=0.0).cost_usd == 0.0
    # A spend rounded to cents may read 0 after a few cheap seconds (under a dollar at the price).
    short = dataclasses.replace(new_job, epochs_done=1, elapsed_s=60.0, last_epoch_time_s=60.0)
    assert (
        short.cost_usd == 0.0
        and billed_usd(short.elapsed_s, short.price_per_hour) < ZERO_SPEND_CHECKED_FROM_USD
    )
    assert dataclasses.replace(
        new_job, epochs_done=job.epochs_done, cost_usd=job.cost_usd
    ) == dataclasses.replace(job, history=None)


def test_the_epoch_time_range_seen_in_training_widens_with_the_deviation_limit() -> None:
    """Jobs drawn within +-8 spreads (``deviation_limit_sd``) reach epoch times the default's
    4-spread range called extrapolation."""
    from slamorl_jax.live_checks import SPREAD_SIGMAS, _epoch_time_range

    params = env_params_from_config(TrainConfig())
    low, high = _epoch_time_range(params)
    wide_low, wide_high = _epoch_time_range(with_values(params, deviation_limit_sd=2 * SPREAD_SIGMAS))
    assert wide_low < low and wide_high > high
    spread = max(float(params.compute_spread), float(params.sync_spread))
    assert wide_low <= np.exp(-2 * SPREAD_SIGMAS * spread)  # the fastest drawn job is inside
