"""A new job's first allocation in ``recommend``: ``--forecast_start``, ``--history``, ``--probe_plan``
and reported probes."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from cli_harness import assert_refused, call

from slamorl_jax import recommend as recommend_cli
from slamorl_jax.env.job_model import epoch_metrics
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.history import HistoryRecord, save_records
from slamorl_jax.live import live_state
from slamorl_jax.live_job import LiveJob
from slamorl_jax.live_slas import SUGGESTIBLE as SUGGESTIBLE_NAMES
from slamorl_jax.live_slas import round_outward, suggested_slas
from slamorl_jax.live_start import forecast_first_allocation, history_first_allocation, probe_plan

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


@pytest.fixture(scope="module")
def params() -> object:
    """The default cluster's env params (the shipped policy's)."""
    return scenario_params("mixed")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    save_records(STORE, tmp_path / "store.json")
    return tmp_path


def _recommend(job: dict, *flags: str) -> object:
    Path("job.json").write_text(json.dumps(job))
    return lambda: recommend_cli.main(["--job=job.json", f"--checkpoint={SHIPPED}", *flags])


def test_history_gives_a_new_job_its_nearest_records_allocation(params: object) -> None:
    answer = history_first_allocation(LiveJob.from_dict(NEW_JOB), STORE, params).as_dict()
    assert (answer["source"], answer["gpus"], answer["cpus"]) == ("history", 8, 32)
    assert answer["record"]["preference"][0] == pytest.approx(0.6)


def test_forecast_start_sends_a_job_that_would_miss_its_deadline_to_more_gpus(params: object) -> None:
    """60 epochs of 1,550 s at the request (4 GPUs) miss a 90,000 s deadline: the forecast's first
    choice is a target of the grid with more GPUs; reported probes are counted."""
    answer = forecast_first_allocation(LiveJob.from_dict(NEW_JOB), params)
    assert answer["source"] == "forecast" and answer["gpus"] > NEW_JOB["gpus"]
    assert [answer["gpus"], answer["cpus"]] in np.asarray(params.target_allocation).tolist()
    probes = [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}]
    probed = LiveJob.from_dict({**NEW_JOB, "probes": probes})
    assert forecast_first_allocation(probed, params)["probes_used"] == 1


def test_the_forecast_start_of_a_reported_env_job_is_the_envs(params: object) -> None:
    """A fresh env job reported as a real one (``live_encoding.reported_job``, reset anywhere: random starts)
    gets the env's forecast start (``probes.first_placement``, ``evaluate``'s
    ``policy_from_forecast``), whose ranking charges no pause for leaving the reset allocation."""
    import jax

    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.probes import first_placement
    from slamorl_jax.episodes import with_init_strategy
    from slamorl_jax.live_encoding import reported_job

    anywhere = with_init_strategy(params, "random")
    keys = jax.random.split(jax.random.key(11), 12)
    _, fresh = jax.jit(jax.vmap(JobAllocationEnv().reset, in_axes=(0, None)))(keys, anywhere)
    env_gpus, env_cpus = jax.device_get(jax.vmap(first_placement, in_axes=(0, None))(fresh, anywhere))
    for i in range(len(keys)):
        answer = forecast_first_allocation(reported_job(jax.tree.map(lambda x, i=i: x[i], fresh)), anywhere)
        assert (answer["gpus"], answer["cpus"]) == (env_gpus[i], env_cpus[i]), i


def test_a_new_job_that_has_spent_time_where_it_is_pays_the_pause_to_move(params: object) -> None:
    """Only a job that has run nothing (no epoch, probe or elapsed time) is placed for free: one
    already running its first epoch (elapsed_s > 0) or probed ranks moves with their pause, as the
    env's launched jobs do."""
    from slamorl_jax.live_job import has_launched

    fresh = LiveJob.from_dict(NEW_JOB)
    running = LiveJob.from_dict({**NEW_JOB, "elapsed_s": 100, "cost_usd": 0.1})
    probed = LiveJob.from_dict({**NEW_JOB, "probes": [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}]})
    assert [has_launched(job) for job in (fresh, running, probed)] == [False, True, True]
    assert has_launched(LiveJob.from_dict({**NEW_JOB, "epochs_done": 1, "elapsed_s": 1550, "cost_usd": 1.4}))


def test_a_new_job_given_less_elapsed_time_than_its_probes_ran_is_refused() -> None:
    """Its busy time was clipped to the elapsed time without a word; left out (0), elapsed is not
    given and stays accepted."""
    probes = [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}, {"gpus": 8, "cpus": 32, "epoch_time_s": 900.0}]
    with pytest.raises(ValueError, match=r"elapsed_s \(10 s\) is less than its probes ran \(122\.5 s"):
        LiveJob.from_dict({**NEW_JOB, "probes": probes, "elapsed_s": 10})
    assert LiveJob.from_dict({**NEW_JOB, "probes": probes, "elapsed_s": 0}).elapsed_s == 0
    assert LiveJob.from_dict({**NEW_JOB, "probes": probes, "elapsed_s": 200}).elapsed_s == 200


def test_a_probed_new_job_counts_busy_time_and_peak_memory_over_its_probes_as_the_env_does(
    params: object,
) -> None:
    """A job that reports its probes, elapsed time and cost but not its utilisation so far gets the
    env's busy GPU and CPU time and peak memory of the probes (``ProbingEnv``; noise-free, no hidden
    deviation, so the profile is the truth): it got the current allocation's utilisation over the
    whole elapsed time, pauses included, where the env counts busy time only while probes run."""
    import jax

    from slamorl_jax.env.job_env import JobAllocationEnv
    from slamorl_jax.env.job_model import epoch_metrics as metrics_at
    from slamorl_jax.env.params import with_values
    from slamorl_jax.env.probes import probe_allocations
    from slamorl_jax.env.probing_env import ProbingEnv
    from slamorl_jax.episodes import with_init_strategy
    from slamorl_jax.live_encoding import reported_job

    exact = with_values(
        with_init_strategy(params, "requested"),
        epoch_time_noise=0.0,
        contention_start_prob=0.0,
        compute_spread=0.0,
        sync_spread=0.0,
    )
    keys = jax.random.split(jax.random.key(2), 6)

    @jax.jit
    def jobs(keys: jax.Array) -> tuple:
        """Each job probed and placed, its probe allocations and their (noise-free) epoch times."""
        _, fresh = jax.vmap(JobAllocationEnv().reset, in_axes=(0, None))(keys, exact)
        _, started = jax.vmap(ProbingEnv(budget=math.inf).reset, in_axes=(0, None))(keys, exact)
        gpus, cpus = jax.vmap(probe_allocations, in_axes=(0, None))(fresh, exact)
        profile_time = jax.vmap(lambda p, g, c: metrics_at(p, g, c, exact).epoch_time_s, in_axes=(None, 0, 0))
        seconds = jax.vmap(profile_time)(fresh.job.profile, gpus, cpus)
        return started, gpus, cpus, seconds

    started, gpus, cpus, seconds = jax.device_get(jobs(keys))
    for i in range(len(keys)):
        job_state = jax.tree.map(lambda x, i=i: x[i], started)
        probes: list[tuple[int, int, float]] = []
        for g, c, t in zip(gpus[i].tolist(), cpus[i].tolist(), seconds[i].tolist(), strict=True):
            if all((g, c) != (pg, pc) for pg, pc, _ in probes):
                probes.append((g, c, t))
        job = dataclasses.replace(
            reported_job(job_state),
            elapsed_s=float(job_state.elapsed_s),
            cost_usd=float(job_state.cost_usd),
            probes=tuple(probes),
        )
        live = live_state(job, exact)
        for name in ("gpu_busy_s", "cpu_busy_s", "peak_memory_gib"):
            np.testing.assert_allclose(getattr(live, name), getattr(job_state, name), rtol=1e-4, err_msg=name)


@pytest.mark.slow  # two in-process recommend runs (about 10 s: loading the policy and its env params)
def test_recommend_cli_history(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = call(_recommend(NEW_JOB, "--history=store.json"), capsys, workdir)
    assert outcome.code == 0 and not outcome.stderr, outcome.report()
    answer = json.loads(outcome.stdout)
    assert (answer["gpus"], answer["match"]) == (8, "workload and GPU type")
    # Only a record of another GPU type: used, and said so on stderr.
    outcome = call(_recommend({**NEW_JOB, "gpu_type": "V100"}, "--history=store.json"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert json.loads(outcome.stdout)["match"] == "workload, another GPU type"
    assert "warning: the store holds no record of this job's workload and GPU type" in outcome.stderr
    other = {**NEW_JOB, "workload": "squad-bert", "epochs_total": 2}
    outcome = call(_recommend(other, "--history=store.json"), capsys, workdir)
    assert json.loads(outcome.stdout)["match"] == "another workload", outcome.report()
    # A job that has run epochs gets the policy's answer as before, with a note that says so.
    started = {**NEW_JOB, "epochs_done": 2, "elapsed_s": 3100, "cost_usd": 2.8}
    outcome = call(_recommend(started, "--history=store.json"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert "action" in json.loads(outcome.stdout)
    assert "note: --history gives a job's first allocation; this job has run 2 epoch(s)" in outcome.stderr
    # ... and --brief shortens that answer, as with --jobs (it was refused with --job).
    outcome = call(_recommend(started, "--history=store.json", "--brief"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert {"action_probability"} <= set(json.loads(outcome.stdout)) and "observation" not in outcome.stdout
    outcome = call(_recommend(NEW_JOB, "--forecast_start"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    assert json.loads(outcome.stdout)["source"] == "forecast"
    # A new job with no deadline or budget gets them suggested, with the forecast's allocation.
    no_slas = {k: v for k, v in NEW_JOB.items() if k not in ("deadline_s", "budget_usd")}
    outcome = call(_recommend(no_slas, "--suggest_slas"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert answer["source"] == "forecast_slas" and answer["deadline_s"] > 0 and answer["budget_usd"] > 0


@pytest.mark.parametrize("flag", ["--forecast_start", "--probe_plan"])
def test_the_shipped_new_job_with_slas_gets_a_first_allocation(
    flag: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's new-job commands run on a shipped file (``docs/example_new_job.json`` leaves
    its deadline and budget out for ``--suggest_slas``, and these answers need them)."""
    job = Path(SHIPPED).parent.parent / "docs" / "example_new_job_slas.json"
    argv = [f"--job={job}", f"--checkpoint={SHIPPED}", flag]
    outcome = call(lambda: recommend_cli.main(argv), capsys, workdir)
    assert outcome.code == 0 and not outcome.stderr, outcome.report()
    assert json.loads(outcome.stdout)["source"] == flag.removeprefix("--").replace("_start", "")


def test_null_slas_are_left_out_for_a_suggestion(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``null`` leaves an optional field out: ``--suggest_slas`` refused a null deadline, and with a
    null minimum throughput suggested none (0.0, not in ``suggested``)."""
    nulls = {**NEW_JOB, "deadline_s": None, "min_throughput": None}
    outcome = call(_recommend(nulls, "--suggest_slas"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert answer["suggested"] == ["deadline_s", "min_throughput"] and answer["min_throughput"] > 0
    assert answer["budget_usd"] == NEW_JOB["budget_usd"] and answer["deadline_s"] > 0
    # A price far past any real one suggested a budget the job could not report back (over 1e12).
    absurd = {**nulls, "budget_usd": None, "price_per_hour": 1e12}
    outcome = call(_recommend(absurd, "--suggest_slas"), capsys, workdir)
    assert_refused(outcome, "the suggested budget_usd", "is over the largest a job may give")


def test_probe_plan_then_reported_probes_feed_the_model(params: object) -> None:
    plan = probe_plan(LiveJob.from_dict(NEW_JOB), params)
    runs = [(run["gpus"], run["cpus"]) for run in plan["probes"]]
    assert runs[0] == (4, 32) and len(set(runs)) == len(runs) >= 2
    probes = [{"gpus": g, "cpus": c, "epoch_time_s": 1400.0 / g} for g, c in runs]
    state = live_state(LiveJob.from_dict({**NEW_JOB, "probes": probes}), params)
    assert int(state.epoch) == 0 and np.asarray(state.model_stats)[0] > 0
    # The report the plan asks for keeps the request (left out, it became the last probe's).
    report = plan["report_with"]
    assert (report["gpus"], report["cpus"]) == runs[-1]
    assert (report["requested_gpus"], report["requested_cpus"]) == (NEW_JOB["gpus"], NEW_JOB["cpus"])
    probed = LiveJob.from_dict({**NEW_JOB, **report, "probes": probes})
    assert probed.request == (NEW_JOB["gpus"], NEW_JOB["cpus"]) and (probed.gpus, probed.cpus) == runs[-1]
    assert not np.asarray(live_state(LiveJob.from_dict(NEW_JOB), params).model_stats).any()


def test_a_job_with_no_slas_yet_gets_its_probe_plan_then_suggested_slas(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe plan reads no SLA, so a new job that has none asks for its probes first (it was
    refused for a missing deadline), then reports them and gets SLAs suggested from them."""
    no_slas = {k: v for k, v in NEW_JOB.items() if k not in ("deadline_s", "budget_usd")}
    with_slas = call(_recommend(NEW_JOB, "--probe_plan"), capsys, workdir)
    outcome = call(_recommend({**no_slas, "min_throughput": None}, "--probe_plan"), capsys, workdir)
    assert outcome.code == 0 and not outcome.stderr, outcome.report()
    plan, same = json.loads(outcome.stdout), json.loads(with_slas.stdout)
    assert plan["then"].endswith("; leave out deadline_s, budget_usd again and ask --suggest_slas for them")
    assert {**plan, "then": same["then"]} == same
    probes = [
        {"gpus": r["gpus"], "cpus": r["cpus"], "epoch_time_s": 6200.0 / r["gpus"]} for r in plan["probes"]
    ]
    probed = {**no_slas, **plan["report_with"], "probes": probes, "elapsed_s": 900.0, "cost_usd": 1.0}
    outcome = call(_recommend(probed, "--suggest_slas"), capsys, workdir)
    assert outcome.code == 0, outcome.report()
    answer = json.loads(outcome.stdout)
    assert answer["probes_used"] == len(probes) and {"deadline_s", "budget_usd"} <= set(answer["suggested"])


@pytest.mark.parametrize(
    ("job", "ask", "phrase"),
    [
        ({**NEW_JOB, "epochs_done": 1, "elapsed_s": 1550, "cost_usd": 1.4}, "plan", "no epoch yet"),
        ({**NEW_JOB, "epochs_done": 1, "elapsed_s": 1550, "cost_usd": 1.4}, "history", "no epoch yet"),
        ({**NEW_JOB, "epochs_done": 1, "elapsed_s": 1550, "cost_usd": 1.4}, "forecast", "no epoch yet"),
        ({**NEW_JOB, "probes": [{"gpus": 99, "cpus": 8, "epoch_time_s": 9.0}]}, "plan", "probes[0]"),
    ],
)
def test_bad_first_allocation_requests_are_refused(job: dict, ask: str, phrase: str, params: object) -> None:
    live_job = LiveJob.from_dict(job)
    with pytest.raises(ValueError, match=re.escape(phrase)):
        if ask == "plan":
            probe_plan(live_job, params)
        elif ask == "forecast":
            forecast_first_allocation(live_job, params)
        else:
            history_first_allocation(live_job, STORE, params)


def test_bad_probes_and_flags_are_refused(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=re.escape("probes[0]")):
        LiveJob.from_dict({**NEW_JOB, "probes": [{"gpus": 1}]})
    outcome = call(_recommend(NEW_JOB, "--history=store.json", "--probe_plan"), capsys, workdir)
    assert_refused(outcome, "ask for one")
    outcome = call(_recommend(NEW_JOB, "--forecast_start", "--probe_plan"), capsys, workdir)
    assert_refused(outcome, "ask for one")
    outcome = call(_recommend(NEW_JOB, "--suggest_slas", "--forecast_start"), capsys, workdir)
    assert_refused(outcome, "ask for one")
    # A running job asked for a forecast start is refused as the library refuses it (it was answered
    # with the policy's next move, as if the flag were not there).
    running = json.loads((Path(SHIPPED).parent.parent / "docs" / "example_job.json").read_text())
    assert_refused(call(_recommend(running, "--forecast_start"), capsys, workdir), "no epoch yet")
    outcome = call(_recommend(NEW_JOB, "--sla_confidence=0.9"), capsys, workdir)
    assert_refused(outcome, "--sla_confidence goes with --suggest_slas")
    # Past float32's normal quantile: an OverflowError (exit 1), a math domain error, or 1e-40 read
    # as 0.5 silently.
    for extreme in ("0.99999999", "1e-300", "1e-40"):
        outcome = call(_recommend(NEW_JOB, "--suggest_slas", f"--sla_confidence={extreme}"), capsys, workdir)
        assert_refused(outcome, "--sla_confidence: an SLA confidence is a probability in [0.001, 0.999]")
    no_slas = {k: v for k, v in NEW_JOB.items() if k not in ("deadline_s", "budget_usd")}
    assert_refused(call(_recommend(no_slas), capsys, workdir), "--suggest_slas suggests them")
    # A job that gives all three has nothing to suggest (it was answered with "suggested": []).
    every_sla = {**NEW_JOB, "min_throughput": 100.0}
    outcome = call(_recommend(every_sla, "--suggest_slas"), capsys, workdir)
    assert_refused(outcome, "--suggest_slas: the job gives every SLA it suggests", "--forecast_start")
    # No hint when a field the flag does not suggest is missing too (the GPU count).
    no_gpus = {k: v for k, v in no_slas.items() if k != "gpus"}
    outcome = call(_recommend(no_gpus), capsys, workdir)
    assert_refused(outcome, "missing job field(s): gpus")
    assert "--suggest_slas" not in outcome.stderr
    outcome = call(_recommend(NEW_JOB, "--history=missing.json"), capsys, workdir)
    assert_refused(outcome, "missing.json")
    # A new job's history start holds nothing (the hold was ignored without a word).
    outcome = call(_recommend(NEW_JOB, "--history=store.json", "--hold_below=0.5"), capsys, workdir)
    assert_refused(outcome, "--hold_below holds the policy's answer; --history answers a new job's start")
    outcome = call(_recommend(NEW_JOB, "--history=store.json", "--brief"), capsys, workdir)
    assert_refused(outcome, "--brief shortens the policy's answer; --history answers a new job's start")


@pytest.mark.parametrize("store", ["missing.json", "bad.json", "store.txt", "outside.json"])
@pytest.mark.parametrize("epochs_done", [0, 2])
def test_an_unusable_history_is_refused_whether_or_not_the_job_has_run(
    store: str, epochs_done: int, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--history`` is read and checked even for a job that has run epochs (which then gets the
    policy's answer): a missing, malformed or wrongly named store, or one with a best allocation
    outside the policy's cluster (clipped to it before; ``history check`` refused it), is one line
    and exit 2."""
    (workdir / "bad.json").write_text('{"records": [{"workload": 1}]}')
    save_records([STORE[0], dataclasses.replace(STORE[1], best_gpus=40)], workdir / "outside.json")
    (workdir / "store.txt").write_text((workdir / "store.json").read_text())
    job = {
        **NEW_JOB,
        "epochs_done": epochs_done,
        "elapsed_s": 1550 * epochs_done,
        "cost_usd": 1.4 * epochs_done,
    }
    assert_refused(call(_recommend(job, f"--history={store}"), capsys, workdir), "--history", store)


def _profile_outcome(job: dict, gpus: int, cpus: int, params: object) -> tuple[float, float, float]:
    """(completion s, total cost $, the job's samples / completion s) of ``job`` placed before its
    first epoch at ``(gpus, cpus)`` and held there, on its workload's profile: every epoch, and no
    pause (a job that has run nothing starts wherever it is placed)."""
    state = live_state(LiveJob.from_dict(job), params)
    metrics = epoch_metrics(state.job.profile, jnp.int32(gpus), jnp.int32(cpus), params)
    time_s = job["epochs_total"] * float(metrics.epoch_time_s)
    samples = time_s * float(metrics.throughput)
    return time_s, time_s * float(metrics.price_per_hour) / 3600.0, samples / time_s


def test_suggested_slas_are_the_forecasts_choice_with_the_reference_margins(params: object) -> None:
    """With no SLAs given, the answer is an allocation of the grid or the request, and its deadline,
    budget and minimum throughput are 1.1 x its projected time and cost and 0.9 x its throughput on
    the profile; no other target is both faster and cheaper; a cost preference gets a later
    deadline and a smaller budget than a time preference (YOLOv3: more GPUs cost more)."""
    answers = {}
    for preference in ("time", "cost"):
        job = {**NEW_JOB, "workload": "voc-yolov3", "preference": preference}
        answer = suggested_slas(LiveJob.from_dict(job), params)
        assert answer["source"] == "forecast_slas" and answer["suggested"] == list(SUGGESTIBLE_NAMES)
        time_s, cost_usd, throughput = _profile_outcome(job, answer["gpus"], answer["cpus"], params)
        assert 1.1 * time_s * 0.9999 <= answer["deadline_s"] <= 1.1 * time_s * 1.001
        assert 1.1 * cost_usd * 0.9999 <= answer["budget_usd"] <= 1.1 * cost_usd * 1.001
        assert 0.9 * throughput * 0.999 <= answer["min_throughput"] <= 0.9 * throughput * 1.0001
        for gpus, cpus in np.asarray(params.target_allocation).tolist():
            other_time, other_cost, _ = _profile_outcome(job, gpus, cpus, params)
            assert not (other_time < time_s * 0.999 and other_cost < cost_usd * 0.999), (gpus, cpus)
        answers[preference] = answer
    assert answers["cost"]["deadline_s"] > answers["time"]["deadline_s"]
    assert answers["cost"]["budget_usd"] < answers["time"]["budget_usd"]


def test_given_slas_stay_and_bind_the_suggestion(params: object) -> None:
    """A deadline the user gives is kept and the suggestion meets it on the forecast, even where the
    preference alone would choose a slower allocation; only the SLAs asked for are suggested."""
    job = {**NEW_JOB, "workload": "voc-yolov3", "preference": "cost"}
    free = suggested_slas(LiveJob.from_dict(job), params)
    fastest = suggested_slas(LiveJob.from_dict({**job, "preference": "time"}), params)
    deadline = round((free["projected"]["time_s"] + fastest["projected"]["time_s"]) / 2)
    bound = suggested_slas(LiveJob.from_dict({**job, "deadline_s": deadline}), params, ("budget_usd",))
    assert bound["deadline_s"] == deadline and bound["suggested"] == ["budget_usd"]
    assert bound["min_throughput"] == 0.0  # not asked for: the job's own (no limit)
    assert bound["projected"]["time_s"] <= deadline < free["projected"]["time_s"]


def test_probes_move_the_suggested_slas(params: object) -> None:
    """A probe that measured the job twice as slow as its profile at the request pushes the
    suggested deadline later."""
    plain = suggested_slas(LiveJob.from_dict(NEW_JOB), params)
    slow = {**NEW_JOB, "probes": [{"gpus": 4, "cpus": 32, "epoch_time_s": 2 * NEW_JOB["last_epoch_time_s"]}]}
    probed = suggested_slas(LiveJob.from_dict(slow), params)
    assert probed["probes_used"] == 1 and probed["deadline_s"] > 1.2 * plain["deadline_s"]


def test_bad_sla_suggestions_are_refused(params: object) -> None:
    with pytest.raises(ValueError, match="no epoch yet"):
        suggested_slas(
            LiveJob.from_dict({**NEW_JOB, "epochs_done": 1, "elapsed_s": 1550, "cost_usd": 1.4}), params
        )
    with pytest.raises(ValueError, match="can be suggested"):
        suggested_slas(LiveJob.from_dict(NEW_JOB), params, ("max_memory_gib",))


def test_suggested_targets_round_away_from_the_job() -> None:
    assert round_outward(1234.51, up=True) == 1235.0
    assert round_outward(0.200011, up=True) == pytest.approx(0.2001)
    assert round_outward(40.8235, up=False) == pytest.approx(40.82)
    assert round_outward(27000.0, up=True) == 27000.0
    # Large values (a million-epoch job's deadline) were rounded through an inexact 10.0 ** -5.
    assert round_outward(460100000.0, up=True) == 460100000.0
    assert round_outward(4.6009e8, up=False) == 460000000.0
    assert round_outward(4.6009e8, up=True) == 460100000.0
    for value in (1e-7 * 3.3333, 7.77e-3, 12345.6789, 9.99999e11):
        assert round_outward(value, up=False) <= value <= round_outward(value, up=True)
