"""Live jobs: the observation built from a running job's report equals the env's, and recommend."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax import recommend as recommend_cli
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.env import (
    EnvParams,
    EnvState,
    JobAllocationEnv,
    action_sets,
    scenario_params,
    shifts,
    validate_params,
)
from slamorl_jax.env.defaults import DEFAULT_RELOCATE_GATE
from slamorl_jax.env.objectives import SLA_NAMES
from slamorl_jax.env.observation import FEATURE_NAMES, observe
from slamorl_jax.env.params import WEIGHT_MODES, with_values
from slamorl_jax.json_input import finite_number, short_value
from slamorl_jax.live import live_state, recommend
from slamorl_jax.live_encoding import reported_job
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
# The README's example job (``docs/example_job.json``).
EXAMPLE_PATH = SHIPPED.parent.parent / "docs" / "example_job.json"
EXAMPLE = json.loads(EXAMPLE_PATH.read_text(encoding="utf-8"))


class Simulated(NamedTuple):
    """Jobs run in the env: the last observation and state, each job's history of measured epochs
    (allocation and epoch time), which jobs ended, and the dual multipliers before the last step."""

    obs: np.ndarray
    state: EnvState
    histories: list[list[tuple[int, int, float]]]
    ended: np.ndarray
    multipliers_before: np.ndarray


def simulate(
    env: JobAllocationEnv,
    params: EnvParams,
    n: int,
    steps: int,
    seeds: tuple[int, int, int],
    actions: Callable[[int], jax.Array] | None = None,
) -> Simulated:
    """``n`` jobs reset and stepped ``steps`` times (random actions, or ``actions(step)``), from the
    ``(reset, action, step)`` key seeds; jitted under ``vmap`` (eager, every op would compile on its own)."""
    reset_seed, action_seed, step_seed = seeds
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.key(reset_seed), n), params
    )
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    histories: list[list[tuple[int, int, float]]] = [[] for _ in range(n)]
    ended = np.zeros(n, bool)
    before = np.asarray(state.multipliers)
    for i in range(steps):
        before = np.asarray(state.multipliers)
        chosen = (
            jax.random.randint(jax.random.key(action_seed + i), (n,), 0, env.num_actions)
            if actions is None
            else actions(i)
        )
        obs, state, _, terminated, truncated, _ = step(
            jax.random.split(jax.random.key(step_seed + i), n), state, chosen, params
        )
        ended |= np.asarray(terminated | truncated)
        for index in range(n):
            histories[index].append(
                (int(state.gpus[index]), int(state.cpus[index]), float(state.epoch_time_s[index]))
            )
    return Simulated(np.asarray(obs), state, histories, ended, before)


def job_row(state: EnvState, index: int) -> EnvState:
    """Job ``index`` of a batch of states, on the host."""
    return jax.tree.map(lambda x: np.asarray(x)[index], state)


def test_live_observation_and_weights_match_the_env(env: JobAllocationEnv) -> None:
    """Jobs mid-run in the env, reported as live jobs with their history, give the env's observation
    (the paper's 21 features and the forecast block) and weights."""
    params = scenario_params("mixed", env.catalog)
    n = 24
    run = simulate(env, params, n, 3, (0, 10, 20))
    checked = 0
    for index in range(n):
        if run.ended[index] or float(np.asarray(run.state.memory_util)[index]) <= 0:
            continue
        job = reported_job(job_row(run.state, index), env.catalog, run.histories[index])
        live = live_state(job, params)
        np.testing.assert_allclose(observe(live, params), run.obs[index], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(live.weights, np.asarray(run.state.weights)[index], rtol=1e-5, atol=1e-6)
        checked += 1
    assert checked >= n // 2


def test_a_reported_price_rise_reprices_the_forecast_as_the_env_does(env: JobAllocationEnv) -> None:
    """After a spot-price rise (``shifts.py`` raises the job's GPU price) the job reports the price it
    pays; the live state carries it into every allocation's forecast, as the env's event does. It
    used to price them at the catalogue's, and the policy could answer otherwise."""
    params = validate_params(
        with_values(
            scenario_params("shifting", env.catalog),
            shift_probs=np.eye(shifts.NUM_SHIFT_KINDS)[shifts.PRICE_RISE],
            shift_at_low=0.0,  # every job's price rises after its first epoch
            shift_at_high=0.0,
        )
    )
    n = 16
    run = simulate(env, params, n, 2, (3, 0, 40), actions=lambda i: jnp.full((n,), i % 2))
    job = run.state.job
    risen = (
        np.asarray(job.profile.gpu_price_per_hour)
        > 1.4 * np.asarray(params.gpu_price_per_hour)[np.asarray(job.gpu_type)]
    )
    assert risen[~run.ended].sum() >= n // 2
    for index in np.flatnonzero(risen & ~run.ended):
        live = live_state(reported_job(job_row(run.state, index), env.catalog, run.histories[index]), params)
        np.testing.assert_allclose(observe(live, params), run.obs[index], rtol=1e-5, atol=1e-5)


def test_a_dual_weights_job_that_passes_its_multipliers_back_gets_the_envs_weights(
    env: JobAllocationEnv,
) -> None:
    """Under ``--weights=dual`` the weights depend on per-SLA multipliers carried across epochs: a job
    that reports the multipliers of its previous answer gets the env's weights and multipliers (it
    got a first reading's, 0.25 on SLA where the env had 0.87); one that does not is told so. Under
    another weight mode the answer's multipliers are null."""
    params = with_values(
        scenario_params("deadline-critical", env.catalog), weights_mode=WEIGHT_MODES.index("dual")
    )
    n = 16
    run = simulate(env, params, n, 4, (5, 50, 60))
    running = np.flatnonzero(~run.ended)
    before = run.multipliers_before
    assert (before[running] > 0).any(), "no job carried an SLA pressure: the test would prove nothing"
    for index in running:
        row = job_row(run.state, index)
        live = live_state(reported_job(row, env.catalog, run.histories[index], before[index]), params)
        np.testing.assert_allclose(live.weights, row.weights, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(live.multipliers, row.multipliers, rtol=1e-5, atol=1e-6)
    job = reported_job(job_row(run.state, running[0]), env.catalog, run.histories[running[0]])
    answer = recommend(load_policy(SHIPPED), job, params)
    assert any("no multipliers for a dual-weights policy" in note for note in answer.outside_training)
    # After one epoch too: the env's multipliers moved at the job's start (its reset is a reading).
    one_epoch = {
        **EXAMPLE,
        "epochs_done": 1,
        "elapsed_s": 1550,
        "cost_usd": 1.4,
        "history": EXAMPLE["history"][:1],
    }
    answer = recommend(load_policy(SHIPPED), LiveJob.from_dict(one_epoch), params)
    assert any("no multipliers for a dual-weights policy" in note for note in answer.outside_training)
    again = LiveJob.from_dict({**EXAMPLE, "multipliers": answer.multipliers})  # an answer's form is a job's
    assert again.multipliers == tuple(answer.multipliers[name] for name in SLA_NAMES)
    # The policy's own (severity) weights neither read nor carry them: null, not a figure that grows.
    assert recommend(load_policy(SHIPPED), again).multipliers is None
    with pytest.raises(ValueError, match="multipliers must be finite and >= 0"):
        LiveJob.from_dict({**EXAMPLE, "multipliers": [-1.0] * len(SLA_NAMES)})
    # Above the policy's cap (params.dual_max, 5 by default): refused where the policy is known.
    too_large = LiveJob.from_dict({**EXAMPLE, "multipliers": [9.0] * len(SLA_NAMES)})
    with pytest.raises(ValueError, match=r"multipliers must be at most the policy's cap on them \(5;"):
        recommend(load_policy(SHIPPED), too_large, params)
    answer = recommend(load_policy(SHIPPED), too_large, with_values(params, dual_max=10.0))
    assert max(answer.multipliers.values()) <= 10.0


def test_a_new_job_reported_without_readings_observes_as_the_env_resets(env: JobAllocationEnv) -> None:
    """Fresh env jobs, reported before their first epoch with no readings (only the job, its
    allocation, request and SLAs), give the env's reset observation and weights: the left-out
    readings are the profile's forecast at the allocation, as the env's reset sets them."""
    params = scenario_params("mixed", env.catalog)
    n = 24
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.key(5), n), params
    )
    starts = set()
    for index in range(n):
        s = jax.tree.map(lambda x, i=index: np.asarray(x)[i], state)
        job = reported_job(s, env.catalog)
        live = live_state(job, params)
        np.testing.assert_allclose(observe(live, params), np.asarray(obs)[index], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(live.weights, np.asarray(state.weights)[index], rtol=1e-5, atol=1e-6)
        starts.add((job.gpus, job.cpus) == (job.requested_gpus, job.requested_cpus))
    assert starts == {True, False}  # jobs at their request and elsewhere (random or cold starts)


def test_a_running_job_must_report_its_last_epoch() -> None:
    data = {k: v for k, v in EXAMPLE.items() if k not in ("throughput", "gpu_util")}
    with pytest.raises(
        ValueError, match=r"missing job field\(s\): throughput, gpu_util \(a job that has run"
    ):
        LiveJob.from_dict(data)
    new = LiveJob.from_dict({**data, "epochs_done": 0, "history": []})
    assert new.throughput is None and new.last_epoch_time_s == EXAMPLE["last_epoch_time_s"]


def test_recommend_is_the_greedy_action_applied() -> None:
    """The recommendation is the policy's argmax on the live observation, applied and clipped."""
    policy = load_policy(SHIPPED)
    job = LiveJob.from_dict(EXAMPLE)
    params = scenario_params("mixed")
    result = recommend(policy, job, params)
    state = live_state(job, params)
    action = int(policy(observe(state, params), state.weights))
    gpus, cpus = action_sets.apply(action, job.gpus, job.cpus, params)
    assert (result.action, result.gpus, result.cpus) == (action, int(gpus), int(cpus))
    assert result.gpu_delta == result.gpus - job.gpus
    assert sum(result.action_probabilities) == pytest.approx(1.0, rel=1e-5)
    assert set(result.weights) == {"time", "cost", "sla"}
    assert result.severities["time"] > 0  # 15,500 s + 50 x 1,550 s overshoots the 90,000 s deadline
    assert list(result.observation) == list(FEATURE_NAMES)
    json.dumps(result.as_dict())


def test_holding_keeps_an_unsure_answer_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Above the policy's top probability ``hold_below`` keeps the job where it is and the answer says
    ``held``, with the policy's probabilities unchanged; below it the answer is the argmax's and not
    held. ``LoadedPolicy`` itself and ``recommend --hold_below`` decide the same way; a threshold
    outside [0, 1] is refused (one line, exit 2 from the command)."""
    policy = load_policy(SHIPPED)
    job = LiveJob.from_dict(EXAMPLE)
    params = scenario_params("mixed")
    plain = recommend(policy, job, params)
    top = max(plain.action_probabilities)
    assert (plain.gpus, plain.cpus) != (job.gpus, job.cpus) and not plain.held and top < 1.0
    held = recommend(policy.holding(1.0), job, params)
    assert held.held and (held.gpus, held.cpus, held.gpu_delta, held.cpu_delta) == (job.gpus, job.cpus, 0, 0)
    assert held.action == 4 and not held.relocate and held.as_dict()["held"] is True
    np.testing.assert_allclose(held.action_probabilities, plain.action_probabilities, rtol=1e-6)
    unsure_below = recommend(policy.holding(top * 0.999), job, params)
    assert (unsure_below.action, unsure_below.gpus, unsure_below.cpus, unsure_below.held) == (
        plain.action,
        plain.gpus,
        plain.cpus,
        False,
    )
    state = live_state(job, params)
    obs = observe(state, params)
    assert int(policy.holding(1.0)(obs, state.weights)) == 4
    assert int(policy.holding(top * 0.999)(obs, state.weights)) == plain.action
    with pytest.raises(ValueError, match="hold_below must be in"):
        policy.holding(1.5)

    assert recommend_cli.main([f"--job={EXAMPLE_PATH}", f"--checkpoint={SHIPPED}", "--hold_below=1"]) == 0
    assert json.loads(capsys.readouterr().out)["held"] is True
    with pytest.raises(SystemExit) as info:
        recommend_cli.main([f"--job={EXAMPLE_PATH}", f"--checkpoint={SHIPPED}", "--hold_below=-0.5"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--hold_below" in err and len(err.strip().splitlines()) == 1


def test_a_relocate_decision_keeps_the_allocation_and_says_relocate() -> None:
    """A ``targets_relocate`` policy that picks relocate is told to restart the job elsewhere at the
    same allocation (``relocate``, the action's name); the shipped policy (which relocates) does
    not say so for the README job, whose epochs ran at the profile's pace, nor does that same
    relocating network behind the default relocation gate, which masks relocate after such epochs
    (the payback rule off, so the gate alone decides)."""

    def relocating(gate: float) -> LoadedPolicy:
        config = TrainConfig(actions="targets_relocate", relocate_gate=gate, relocate_payback=0.0)
        network = ActorCritic(config.network)
        params = init_params(network, jax.random.key(0), len(FEATURE_NAMES))
        bias = params["params"]["actor"]["Dense_0"]["bias"]
        params["params"]["actor"]["Dense_0"]["bias"] = bias.at[action_sets.RELOCATE_ACTION].set(1e3)
        act = jax.jit(lambda p, obs, w: jnp.argmax(network.apply(p, obs, w)[0], axis=-1))
        return LoadedPolicy(config=config, params=params, network=network, step=0, _act=act)

    job = LiveJob.from_dict(EXAMPLE)
    result = recommend(relocating(0.0), job, scenario_params("mixed"))
    assert result.action == action_sets.RELOCATE_ACTION and result.relocate
    assert (result.gpus, result.cpus, result.gpu_delta, result.cpu_delta) == (job.gpus, job.cpus, 0, 0)
    assert result.action_name == action_sets.RELOCATE_NAME and result.as_dict()["relocate"] is True
    assert not recommend(relocating(DEFAULT_RELOCATE_GATE), job, scenario_params("mixed")).relocate
    assert not recommend(load_policy(SHIPPED), job, scenario_params("mixed")).relocate


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": 1}, 'unknown job field\\(s\\): "colour"$'),  # near no field: no guess
        (
            {"peak_memory_gb": 70},
            'unknown job field\\(s\\): "peak_memory_gb" \\(did you mean peak_memory_gib\\?\\)$',
        ),
        # a typo of a field the report gives is no guess at it ("gpu" beside "gpus")
        ({"gpu": 4}, 'unknown job field\\(s\\): "gpu"$'),
        (
            {"peak_memory_gb": 70, "mean_gpu_utl": 0.5},
            'did you mean "mean_gpu_utl": mean_gpu_util, "peak_memory_gb": peak_memory_gib\\?',
        ),
        ({"a\nb": 1}, 'unknown job field\\(s\\): "a\\\\nb"$'),  # one line, the name as JSON writes it
        ({"gpus": None}, "gpus must be a finite number"),
        ({"gpus": 2.5}, "gpus must be an integer"),
        ({"gpu_util": 1.5}, "gpu_util is a fraction"),
        ({"epochs_done": 70}, "epochs_done <= epochs_total"),
        ({"deadline_s": 0}, "deadline_s must be at least 1e-06"),
        # float32 holds nothing this small: it gave NaN features and a silent action 0
        ({"deadline_s": 1e-50}, "deadline_s must be at least 1e-06"),
        ({"memory_used_gib": 0, "memory_alloc_gib": 1e-50}, "memory_alloc_gib must be at least"),
        ({"history": [{"gpus": 4, "cpus": 32, "epoch_time_s": 1e-50}]}, "history\\[0\\] needs"),
        # the last history entry is the last epoch: its allocation and time are the reported ones
        ({"last_epoch_time_s": 3100}, "history's last entry .* is not the last epoch"),
        ({"gpus": 8}, "history's last entry \\(4 GPUs x 32 CPUs"),
        ({"preference": "fast"}, "unknown preference"),
        ({"preference": 3}, "preference must be a name or three weights"),
        # a nested list was named "a finite number" (one weight's message)
        ({"preference": [[1, 2, 3]]}, "preference must be a name or three weights, got \\[\\[1, 2, 3\\]\\]"),
        ({"peak_memory_gib": -1}, "peak_memory_gib must be >= 0"),
        # the peak over the job so far includes the last epoch (it was accepted and judged on)
        ({"peak_memory_gib": 10}, "peak_memory_gib \\(10\\) is below memory_used_gib \\(64\\)"),
    ],
)
def test_bad_live_jobs_are_refused_with_the_field_named(change: dict, message: str) -> None:
    """Every bad field gives a ValueError that names it."""
    with pytest.raises(ValueError, match=message):
        LiveJob.from_dict({**EXAMPLE, **change})


def test_a_new_job_may_report_a_peak_of_zero() -> None:
    """A job that has run nothing has used no memory: the env's fresh jobs have a peak of 0 (it was
    refused as below 1e-06); before the first epoch a peak below the reading's forecast is fine."""
    new = {**EXAMPLE, "epochs_done": 0, "elapsed_s": 0, "cost_usd": 0, "history": None}
    assert LiveJob.from_dict({**new, "peak_memory_gib": 0}).peak_memory_gib == 0
    assert LiveJob.from_dict({**EXAMPLE, "peak_memory_gib": 64}).peak_memory_gib == 64
    # Two tools' readings of one peak may differ in the last digits.
    assert LiveJob.from_dict({**EXAMPLE, "peak_memory_gib": 63.99}).peak_memory_gib == 63.99
    # A 0-d array is not three weights (it raised a TypeError from iterating it).
    with pytest.raises(ValueError, match="preference must be a name or three weights"):
        dataclasses.replace(LiveJob.from_dict(EXAMPLE), preference=np.array(1.0))


def test_null_leaves_an_optional_field_out() -> None:
    """A platform that writes unset fields as null gets their defaults (it was refused for every
    optional field with a default other than null); a required field stays required."""
    optional = ("min_throughput", "max_memory_gib", "min_gpu_util", "min_cpu_util", "preference", "history")
    assert LiveJob.from_dict({**EXAMPLE, **dict.fromkeys(optional)}) == LiveJob.from_dict(
        {k: v for k, v in EXAMPLE.items() if k not in optional}
    )
    with pytest.raises(ValueError, match="deadline_s must be a finite number, got null"):
        LiveJob.from_dict({**EXAMPLE, "deadline_s": None})


def test_a_non_finite_observation_is_refused_not_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a job's figures still make a NaN feature, the answer is refused naming it: a NaN picks
    action 0 silently and prints as invalid JSON."""
    import slamorl_jax.live as live

    real = live._decide

    def poisoned(*args: object) -> tuple:
        obs, *rest = real(*args)
        return (obs.at[:, 0].set(jnp.nan), *rest)

    monkeypatch.setattr(live, "_decide", poisoned)
    with pytest.raises(ValueError, match=f"non-finite observation \\({FEATURE_NAMES[0]}\\)"):
        recommend(load_policy(SHIPPED), LiveJob.from_dict(EXAMPLE))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpus": "4"}, 'job field gpus must be a finite number, got "4"'),
        ({"gpus": 2.5}, "job field gpus must be an integer"),
        ({"gpus": True}, "job field gpus must be a finite number, got true"),
        ({"cpus": None}, "job field cpus must be a finite number, got null"),
        ({"epochs_total": 60.5}, "job field epochs_total must be an integer"),
        ({"deadline_s": "90000"}, "job field deadline_s must be a finite number"),
        ({"budget_usd": None}, "job field budget_usd must be a finite number"),
        ({"budget_usd": [80]}, "job field budget_usd must be a finite number"),
        ({"gpu_util": True}, "job field gpu_util must be a finite number"),
        ({"min_throughput": None}, "job field min_throughput must be a finite number"),
        ({"requested_gpus": 2.5}, "job field requested_gpus must be an integer"),
        ({"preference": ["a", "b", "c"]}, "job field preference must be a finite number"),
        ({"preference": (True, False, False)}, "job field preference must be a finite number"),
        ({"workload": 3}, "workload must be a catalogue name"),
        ({"history": [(4, 32)]}, "history[0] must be (gpus, cpus, epoch_time_s)"),
        ({"history": [(4.5, 32, 1550.0)]}, "job field history[0].gpus must be an integer"),
        ({"history": [(True, 32, 1550.0)]}, "job field history[0].gpus must be a finite number"),
        ({"history": [(4, 32, "1550")]}, "job field history[0].epoch_time_s must be a finite number"),
        ({"history": "abc"}, "history must be a sequence of runs"),
        ({"probes": [(4, 32)]}, "probes[0] must be (gpus, cpus, epoch_time_s)"),
    ],
)
def test_the_constructor_refuses_wrong_types_with_the_field_named(change: dict, message: str) -> None:
    """``LiveJob(...)`` from Python checks types as ``from_dict`` does for JSON. It used to take 2.5 GPUs
    or ``True`` as a count (the state then truncated them), and strings or ``None`` failed with a bare
    TypeError from a comparison or a ``jnp.asarray``."""
    job = LiveJob.from_dict(EXAMPLE)
    with pytest.raises(ValueError) as info:
        dataclasses.replace(job, **change)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_numpy_and_jax_scalars_are_plain_numbers_in_a_job() -> None:
    """NumPy and JAX scalars are numbers, to ``from_dict`` (which refused ``np.int64``) and to the
    constructor; the job keeps them as Python ints and floats, and JSON-form history works too."""
    numbers = {
        "gpus": np.int64(4),
        "cpus": jnp.int32(32),
        "gpu_util": np.float32(0.5),
        "budget_usd": jnp.float32(80),
    }
    for job in (
        LiveJob.from_dict({**EXAMPLE, **numbers}),
        dataclasses.replace(LiveJob.from_dict(EXAMPLE), **numbers),
    ):
        assert (job.gpus, job.cpus, job.gpu_util, job.budget_usd) == (4, 32, 0.5, 80.0)
        assert type(job.gpus) is int and type(job.gpu_util) is float
    job = dataclasses.replace(LiveJob.from_dict(EXAMPLE), history=EXAMPLE["history"])
    assert job.history == LiveJob.from_dict(EXAMPLE).history


def test_recommend_refuses_arguments_of_the_wrong_type() -> None:
    """A mapping for the job, or something else for the policy or params: a TypeError naming it, not
    an AttributeError from deep inside."""
    job = LiveJob.from_dict(EXAMPLE)
    with pytest.raises(TypeError, match="policy must be a LoadedPolicy, got NoneType"):
        recommend(None, job)
    policy = load_policy(SHIPPED)
    with pytest.raises(TypeError, match="job must be a LiveJob, got dict"):
        recommend(policy, EXAMPLE)
    with pytest.raises(TypeError, match="params must be EnvParams"):
        recommend(policy, job, "mixed")


def test_recommend_refuses_params_whose_derived_tables_are_stale() -> None:
    """Prices changed with ``with_values`` but the derived tables not recomputed: ``recommend`` read
    the old tables' forecasts and answered differently from the same params made whole, silently."""
    from slamorl_jax.env import with_derived_tables

    job = LiveJob.from_dict(EXAMPLE)
    policy = load_policy(SHIPPED)
    params = policy.env_params
    tripled = with_values(params, gpu_price_per_hour=np.asarray(params.gpu_price_per_hour) * 3)
    with pytest.raises(ValueError, match="stale"):
        recommend(policy, job, tripled)
    whole = with_derived_tables(tripled)
    answer = recommend(policy, job, whole)
    # Tripled GPU prices: the features read from the recomputed tables move with them (read from
    # stale tables, they would be the shipped prices' features).
    assert answer.observation != recommend(policy, job).observation
    assert recommend(policy, job, whole) == answer  # the same object, checked once


def test_params_are_validated_once_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """``recommend`` in a loop with the same params pays the check once; another object, once more."""
    from slamorl_jax.env import validation

    calls: list[object] = []
    real = validation.validate_params
    monkeypatch.setattr(validation, "validate_params", lambda p: calls.append(p) or real(p))
    monkeypatch.setattr(validation, "_RECENTLY_VALIDATED", [])
    job, policy = LiveJob.from_dict(EXAMPLE), load_policy(SHIPPED)
    params = policy.env_params
    for _ in range(3):
        recommend(policy, job, params)
    assert len(calls) == 1
    recommend(policy, job, dataclasses.replace(params))  # equal, but another object
    assert len(calls) == 2


def test_the_module_docstrings_job_is_the_readme_example() -> None:
    """The docstring's JSON job was out of the training range on three readings and refused against
    its own history: it is ``docs/example_job.json`` (its history cut to one epoch)."""
    import re

    from slamorl_jax import live_job

    block = re.search(r"::\n\n(.*?)\n\n", live_job.__doc__, flags=re.S).group(1)
    job = json.loads(block.replace(", ...]", "]"))
    assert {**job, "history": EXAMPLE["history"]} == EXAMPLE
    assert job["history"] == EXAMPLE["history"][:1]


def test_missing_fields_are_listed() -> None:
    """Required fields left out are listed; optional ones may be."""
    data = {k: v for k, v in EXAMPLE.items() if k not in ("throughput", "min_throughput")}
    with pytest.raises(ValueError, match="missing job field"):
        LiveJob.from_dict(data)
    data["throughput"] = 1.0
    assert LiveJob.from_dict(data).min_throughput == 0.0


def test_recommend_cli_reads_stdin_and_refuses_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """JSON on stdin gives a JSON recommendation; bad JSON, a bad field or a missing file exit 2
    with one line."""
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(EXAMPLE)))
    assert recommend_cli.main(["--job=-", f"--checkpoint={SHIPPED}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"gpus", "cpus", "action", "weights", "severities"} <= set(out)

    bad = tmp_path / "bad.json"
    cases = [("{not json", "not valid JSON"), (json.dumps({**EXAMPLE, "cpus": 0}), "cpus must be >= 1")]
    for text, message in cases:
        bad.write_text(text)
        with pytest.raises(SystemExit) as info:
            recommend_cli.main([f"--job={bad}", f"--checkpoint={SHIPPED}"])
        err = capsys.readouterr().err
        assert info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as info:
        recommend_cli.main([f"--job={tmp_path / 'missing.json'}", f"--checkpoint={SHIPPED}"])
    assert info.value.code == 2 and "cannot read" in capsys.readouterr().err


def test_messages_write_values_as_json_does() -> None:
    """Job files are JSON, so a refused value reads as the file wrote it (``true``, not ``True``);
    a value JSON cannot write keeps its ``repr``; long values are cut."""
    assert short_value(True) == "true"
    assert short_value({"a": None}) == '{"a": null}'
    assert short_value(object).startswith("<class")
    assert short_value("x" * 200, limit=20) == '"' + "x" * 16 + "..."
    with pytest.raises(ValueError, match=r'workload must be a catalogue name \(a string\), got \{"a": 1\}'):
        LiveJob.from_dict({**EXAMPLE, "workload": {"a": 1}})


def test_a_job_round_trips_through_its_json_form() -> None:
    """``LiveJob.as_dict`` is what ``from_dict`` reads back to the same job, through JSON too: a new
    job (its spend filled with 0), a running one with runs, weights and multipliers."""
    new = LiveJob.from_dict({name: EXAMPLE[name] for name in LiveJob.required_fields()} | {"epochs_done": 0})
    running = dataclasses.replace(
        LiveJob.from_dict(EXAMPLE),
        preference=(0.5, 0.25, 0.25),
        probes=((2, 8, 100.0),),
        multipliers=(1.0, 0.0, 0.5, 0.0, 0.0, 2.0),
    )
    for job in (new, running):
        data = job.as_dict()
        assert LiveJob.from_dict(data) == job
        assert LiveJob.from_dict(json.loads(json.dumps(data))) == job
        assert None not in data.values()
    assert running.as_dict()["history"][-1] == EXAMPLE["history"][-1]


def test_one_number_parser_for_jobs_and_history_records() -> None:
    """A job's fields and a history record's read numbers the same way: real numbers and NumPy or
    JAX scalars, text only from a CSV cell, never a bool, nothing beyond a float."""
    assert finite_number(3, "x") == 3.0 and isinstance(finite_number(np.int64(3), "x"), float)
    assert finite_number(jnp.float32(2.5), "x") == 2.5
    assert finite_number(" 60 ", "epochs", text=True) == 60.0
    for value, text in [("60", False), ("six", True), (True, False), (np.bool_(True), True), (None, False)]:
        with pytest.raises(ValueError, match="x must be a finite number, got"):
            finite_number(value, "x", text=text)
    assert finite_number(jnp.bfloat16(1.5), "x") == 1.5
    for value in (float("nan"), np.float32("inf"), 10**400, "1e999", np.ones(2), np.timedelta64(60, "s")):
        with pytest.raises(ValueError, match="must be a finite number"):
            finite_number(value, "x", text=True)
    with pytest.raises(ValueError) as refused:  # one line, though an array's repr spans several
        finite_number(np.ones((3, 3)), "x")
    assert "\n" not in str(refused.value)


def test_recommend_refuses_params_on_another_target_grid_than_the_policys() -> None:
    """The policy's target features and actions mean the grid it was trained on: params with other
    CPUs per GPU (``env/target_grid.py``) would answer with targets the policy never learned."""
    from slamorl_jax.env.target_grid import with_target_grid

    job = LiveJob.from_dict(EXAMPLE)
    policy = load_policy(SHIPPED)
    other = with_target_grid(policy.env_params, (0.0, 2.0, 4.0, 6.0, 10.0))
    with pytest.raises(ValueError, match=re.escape("the policy was trained on [0.0, 2.0, 4.0, 8.0, 12.0]")):
        recommend(policy, job, other)
    back = with_target_grid(other, policy.config.target_cpus_per_gpu)
    assert recommend(policy, job, back) == recommend(policy, job)


def test_an_answer_on_another_cluster_than_the_policys_says_so() -> None:
    """A platform passing its own 8-GPU nodes got the shipped policy's answer with no word that the
    policy was trained on 4-GPU nodes and reads allocations scaled to them."""
    from slamorl_jax.env import with_derived_tables

    policy, job = load_policy(SHIPPED), LiveJob.from_dict(EXAMPLE)
    assert not any("the cluster" in note for note in recommend(policy, job).outside_training)
    bigger = with_derived_tables(with_values(policy.env_params, gpus_per_node=8, max_nodes=2))
    notes = recommend(policy, job, bigger).outside_training
    assert any(
        note.startswith(
            "the cluster (16 GPUs a job, 8 GPUs and 48 CPUs a node, CPU step 4) is not the policy's"
        )
        for note in notes
    ), notes
